// Progress of a run: on a terminal a block of status lines redrawn in place
// (per model: turns done/total, verdict counts, elapsed, ETA); otherwise one
// plain log line per recorded turn.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ptxbench::agent::detail {

class ProgressDisplay {
 public:
  enum class Style { redraw, lines, quiet };
  ProgressDisplay(Style style, std::FILE *out, std::vector<std::string> models, std::vector<int> total_turns);

  /// Turns finished before this session (resume): count toward done, not toward the rate.
  void add_previous(std::size_t model, int turns, const std::map<std::string, int> &status_counts);
  /// A recorded turn; `turns_no_longer_needed` = turns the trajectory will not run after stopping early.
  void on_turn(std::size_t model, const std::string &status, int turns_no_longer_needed,
               const std::string &log_line);
  /// A message that must not be overdrawn (warnings).
  void message(const std::string &text);
  /// Redraws (redraw style) at most every ~250 ms; cheap to call often.
  void tick();
  /// Final redraw, leaves the cursor below the block.
  void finish();

 private:
  struct Model {
    std::string name;
    int total = 0;
    int done = 0;  ///< turns recorded + turns skipped by early stops
    int done_this_session = 0;
    std::map<std::string, int> counts;
  };
  void draw_locked();
  std::string line_for(const Model &m, double elapsed) const;

  Style style_;
  std::FILE *out_;
  std::vector<Model> models_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  int lines_drawn_ = 0;
};

/// "1h02m", "3m05s", "12s"
std::string format_duration(double seconds);

}  // namespace ptxbench::agent::detail
