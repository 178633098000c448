// Blocking queues for the loop's stages. close() wakes every waiter; pop()
// then drains what is left (FIFO) or returns nothing (closed and empty).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <queue>
#include <vector>

namespace ptxbench::agent::detail {

template <class T, class Compare = void>
class BlockingQueue {
 public:
  /// False when closed (the item is not taken).
  bool push(T item) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return false;
      items_.push(std::move(item));
    }
    cv_.notify_one();
    return true;
  }
  /// Blocks until an item or close(); nullopt when closed and (if discard) regardless of items left.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty() || discard_on_close_) return std::nullopt;
    T item = top(items_);
    items_.pop();
    return item;
  }
  /// `discard`: items still queued are dropped (returned by drain()).
  void close(bool discard = false) {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      discard_on_close_ = discard_on_close_ || discard;
    }
    cv_.notify_all();
  }
  std::vector<T> drain() {
    std::lock_guard lock(mutex_);
    std::vector<T> out;
    while (!items_.empty()) {
      out.push_back(top(items_));
      items_.pop();
    }
    return out;
  }

 private:
  using Container = std::conditional_t<
      std::is_void_v<Compare>, std::queue<T, std::deque<T>>,
      std::priority_queue<T, std::vector<T>,
                          std::conditional_t<std::is_void_v<Compare>, std::less<T>, Compare>>>;
  static T top(Container &c) {
    if constexpr (std::is_void_v<Compare>) {
      return std::move(c.front());
    } else {
      return c.top();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  Container items_;
  bool closed_ = false;
  bool discard_on_close_ = false;
};

}  // namespace ptxbench::agent::detail
