#include "agent/detail/progress.hpp"

#include <fmt/core.h>

namespace ptxbench::agent::detail {

std::string format_duration(double seconds) {
  if (seconds < 0) seconds = 0;
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

ProgressDisplay::ProgressDisplay(Style style, std::FILE *out, std::vector<std::string> models,
                                 std::vector<int> total_turns)
    : style_(style), out_(out) {
  for (std::size_t i = 0; i < models.size(); ++i) {
    Model m;
    m.name = std::move(models[i]);
    m.total = i < total_turns.size() ? total_turns[i] : 0;
    models_.push_back(std::move(m));
  }
}

void ProgressDisplay::add_previous(std::size_t model, int turns,
                                   const std::map<std::string, int> &status_counts) {
  std::lock_guard lock(mutex_);
  auto &m = models_.at(model);
  m.done += turns;
  for (const auto &[status, n] : status_counts) m.counts[status] += n;
}

void ProgressDisplay::on_turn(std::size_t model, const std::string &status, int turns_no_longer_needed,
                              const std::string &log_line) {
  std::lock_guard lock(mutex_);
  auto &m = models_.at(model);
  m.done += 1 + turns_no_longer_needed;
  m.done_this_session += 1 + turns_no_longer_needed;
  m.counts[status] += 1;
  if (style_ == Style::lines) {
    fmt::print(out_, "{}\n", log_line);
    std::fflush(out_);
  }
}

void ProgressDisplay::message(const std::string &text) {
  std::lock_guard lock(mutex_);
  if (style_ == Style::redraw && lines_drawn_ > 0) {
    fmt::print(out_, "\033[{}A\r\033[J", lines_drawn_);
    lines_drawn_ = 0;
  }
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

std::string ProgressDisplay::line_for(const Model &m, double elapsed) const {
  std::string counts;
  for (const auto &[status, n] : m.counts) counts += fmt::format(" {} {}", status, n);
  std::string eta = "?";
  const int session_total = m.total - (m.done - m.done_this_session);
  if (m.done >= m.total) {
    eta = "done";
  } else if (m.done_this_session > 0 && session_total > 0) {
    eta = format_duration(elapsed / m.done_this_session * (m.total - m.done));
  }
  return fmt::format("{:<20} turns {:>5}/{:<5}{}  elapsed {}  ETA {}", m.name, m.done, m.total, counts,
                     format_duration(elapsed), eta);
}

void ProgressDisplay::draw_locked() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string block;
  if (lines_drawn_ > 0) block += fmt::format("\033[{}A", lines_drawn_);
  for (const auto &m : models_) block += "\r\033[2K" + line_for(m, elapsed) + "\n";
  fmt::print(out_, "{}", block);
  std::fflush(out_);
  lines_drawn_ = static_cast<int>(models_.size());
  last_draw_ = std::chrono::steady_clock::now();
}

void ProgressDisplay::tick() {
  if (style_ != Style::redraw) return;
  std::lock_guard lock(mutex_);
  if (std::chrono::steady_clock::now() - last_draw_ < std::chrono::milliseconds(250)) return;
  draw_locked();
}

void ProgressDisplay::finish() {
  std::lock_guard lock(mutex_);
  if (style_ == Style::redraw) {
    draw_locked();
  } else if (style_ == Style::lines) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    for (const auto &m : models_) fmt::print(out_, "{}\n", line_for(m, elapsed));
    std::fflush(out_);
  }
}

}  // namespace ptxbench::agent::detail
