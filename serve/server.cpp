#include "serve/server.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/core.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "serve/detail/key_values.hpp"
#include "serve/request.hpp"

namespace ptxbench::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

namespace {

using Response = http::response<http::string_body>;

struct Shared {
  const ServerOptions &options;
  VerdictService &service;
  const evaluator::EvaluatorSettings &base;
  std::atomic<std::size_t> connections{0};
  std::size_t writing = 0;  ///< responses being written (the io thread only)
  /// Closed when the server stops: evaluations finishing later must not post to the gone io_context.
  struct Gate {
    std::mutex mutex;
    bool open = true;
  };
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
};

Response json_response(http::status status, const json &body, unsigned version) {
  Response res{status, version};
  res.set(http::field::server, "ptxbench-serve");
  res.set(http::field::content_type, "application/json");
  res.body() = body.dump() + "\n";
  res.prepare_payload();
  return res;
}

Response error_response(http::status status, std::string field, std::string message, unsigned version) {
  return json_response(status, {{"error", {{"field", std::move(field)}, {"message", std::move(message)}}}},
                       version);
}

bool token_matches(std::string_view given, std::string_view expected) {
  // Length-independent comparison of the bytes, so timing says little about the token.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % std::max<std::size_t>(1, expected.size())]);
  return diff == 0;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared &shared)
      : stream_(std::move(socket)), timer_(stream_.get_executor()), shared_(shared) {
    ++shared_.connections;
  }
  ~Session() { --shared_.connections; }

  void start(bool refuse) {
    if (refuse) {
      keep_alive_ = false;
      send(error_response(http::status::service_unavailable, "", "too many open connections", 11));
      return;
    }
    read();
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(shared_.options.max_body_bytes);
    stream_.expires_after(
        std::chrono::milliseconds(static_cast<long>(shared_.options.read_timeout_s * 1000)));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted) {
      close();
      return;
    }
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      send(error_response(http::status::payload_too_large, "",
                          fmt::format("the body is larger than {} bytes", shared_.options.max_body_bytes),
                          11));
      return;
    }
    if (ec) {
      keep_alive_ = false;
      send(error_response(http::status::bad_request, "", fmt::format("not an HTTP request: {}", ec.message()),
                          11));
      return;
    }
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    stream_.expires_never();
    route();
  }

  void route() {
    const unsigned v = request_.version();
    const std::string_view target(request_.target().data(), request_.target().size());
    const auto qmark = target.find('?');
    const std::string_view path = target.substr(0, qmark);
    const std::string_view query =
        qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);
    const auto method = request_.method();
    if (path == "/healthz") {
      if (method != http::verb::get) return send(not_allowed("GET"));
      return send(json_response(
          http::status::ok,
          {{"status", shared_.service.draining() ? "draining" : "ok"},
           {"version", PTXBENCH_VERSION},
           {"gpu_stages", shared_.options.gpu_note.empty() ? json("run") : json(shared_.options.gpu_note)}},
          v));
    }
    if (!shared_.options.token.empty()) {
      const auto auth = request_[http::field::authorization];
      const std::string_view given(auth.data(), auth.size());
      if (!given.starts_with("Bearer ") || !token_matches(given.substr(7), shared_.options.token)) {
        Response res = error_response(http::status::unauthorized, "Authorization",
                                      "a bearer token is required (Authorization: Bearer <token>)", v);
        res.set(http::field::www_authenticate, "Bearer");
        return send(std::move(res));
      }
    }
    if (path == "/v1/verdicts") {
      if (method != http::verb::post) return send(not_allowed("POST"));
      return send(submit());
    }
    if (path.starts_with("/v1/verdicts/")) {
      if (method != http::verb::get) return send(not_allowed("GET"));
      return get_verdict(std::string(path.substr(13)), query);
    }
    if (path == "/v1/queue") {
      if (method != http::verb::get) return send(not_allowed("GET"));
      return send(json_response(http::status::ok, shared_.service.queue_stats(), v));
    }
    if (path == "/v1/tasks") {
      if (method != http::verb::get) return send(not_allowed("GET"));
      return send(json_response(http::status::ok, {{"tasks", task_summaries(shared_.service.tasks())}}, v));
    }
    send(error_response(http::status::not_found, "path", fmt::format("no route {}", std::string(path)), v));
  }

  Response not_allowed(const char *allow) {
    Response res = error_response(http::status::method_not_allowed, "method", fmt::format("use {}", allow),
                                  request_.version());
    res.set(http::field::allow, allow);
    return res;
  }

  Response submit() {
    const unsigned v = request_.version();
    json body;
    try {
      body = json::parse(request_.body());
    } catch (const json::parse_error &e) {
      return error_response(http::status::bad_request, "", fmt::format("the body is not JSON: {}", e.what()),
                            v);
    }
    auto batch = parse_submissions(body, shared_.service.tasks(), shared_.base, shared_.service.options());
    if (!batch)
      return error_response(http::status::bad_request, batch.error().field, batch.error().message, v);
    const bool single = !body.contains("requests");
    auto accepted = shared_.service.submit(std::move(*batch));
    if (!accepted) {
      const Refusal &r = accepted.error();
      Response res = error_response(r.kind == Refusal::Kind::queue_full ? http::status::too_many_requests
                                                                        : http::status::service_unavailable,
                                    "", r.message, v);
      res.set(http::field::retry_after, fmt::format("{}", static_cast<long>(std::ceil(r.retry_after_s))));
      return res;
    }
    json out = {{"ids", accepted->ids}, {"deduplicated", accepted->deduplicated}};
    if (single) out["id"] = accepted->ids.front();
    return json_response(http::status::accepted, out, v);
  }

  void get_verdict(std::string id, std::string_view query) {
    const unsigned v = request_.version();
    double wait = 0;
    for (const auto &[key, given] : detail::key_values(query, '&')) {
      const std::string value = given.value_or("");
      if (key != "wait")
        return send(
            error_response(http::status::bad_request, key, "unknown query parameter (known: wait)", v));
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), wait);
      if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(wait) || wait < 0 ||
          wait > shared_.options.max_wait_s)
        return send(error_response(
            http::status::bad_request, "wait",
            fmt::format("must be a number of seconds from 0 to {:g}", shared_.options.max_wait_s), v));
    }
    if (wait > 0) {
      std::weak_ptr<Session> weak = weak_from_this();
      auto executor = stream_.get_executor();
      auto until = shared_.service.notify_when_final(id, [weak, executor, gate = shared_.gate] {
        std::lock_guard lock(gate->mutex);
        if (!gate->open) return;
        asio::post(executor, [weak] {
          if (auto self = weak.lock()) self->timer_.cancel();
        });
      });
      if (until) {
        const auto limit =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait));
        timer_.expires_at(std::min(*until, limit));
        timer_.async_wait([self = shared_from_this(), id](beast::error_code) { self->answer_poll(id); });
        return;
      }
    }
    answer_poll(id);
  }

  void answer_poll(const std::string &id) {
    auto state = shared_.service.poll(id);
    if (!state)
      return send(error_response(http::status::not_found, "id", fmt::format("no request '{}'", id),
                                 request_.version()));
    send(json_response(http::status::ok, *state, request_.version()));
  }

  void send(Response res) {
    response_ = std::move(res);
    response_.keep_alive(keep_alive_);
    ++shared_.writing;
    stream_.expires_after(std::chrono::seconds(30));
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      --self->shared_.writing;
      if (ec || !self->keep_alive_) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  asio::steady_timer timer_;
  Shared &shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  Response response_;
  bool keep_alive_ = true;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context &ioc, tcp::acceptor acceptor, Shared &shared)
      : ioc_(ioc), acceptor_(std::move(acceptor)), shared_(shared) {}
  void accept() {
    acceptor_.async_accept(ioc_, [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (!ec) {
        const bool refuse = self->shared_.connections.load() >= self->shared_.options.max_connections;
        std::make_shared<Session>(std::move(socket), self->shared_)->start(refuse);
      }
      self->accept();
    });
  }
  void close() {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  asio::io_context &ioc_;
  tcp::acceptor acceptor_;
  Shared &shared_;
};

}  // namespace

int run_server(const ServerOptions &options, VerdictService &service,
               const evaluator::EvaluatorSettings &base) {
  Shared shared{options, service, base};  // outlives the io_context, whose sessions point at it
  asio::io_context ioc{1};
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) {
    fmt::print(stderr, "ptxbench serve: --host '{}' is not an IP address: {}\n", options.host, ec.message());
    return 2;
  }
  tcp::acceptor acceptor(ioc);
  const tcp::endpoint endpoint(address, options.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    fmt::print(stderr, "ptxbench serve: cannot listen on {}:{}: {}\n", options.host, options.port,
               ec.message());
    return 3;
  }
  const auto bound = acceptor.local_endpoint();
  auto listener = std::make_shared<Listener>(ioc, std::move(acceptor), shared);
  listener->accept();
  fmt::print("ptxbench serve: listening on http://{}:{}\n", bound.address().to_string(), bound.port());
  std::fflush(stdout);

  // Drain: refuse new submissions, let accepted evaluations finish (bounded), let their verdicts be fetched
  // (bounded), then stop. A second signal stops at once.
  int exit_code = 0;
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  asio::steady_timer drain_timer(ioc);
  Clock::time_point drain_until{}, linger_until{};
  bool draining = false;
  std::function<void()> check_drain = [&] {
    const auto now = Clock::now();
    const bool evaluations_done = service.idle() || now >= drain_until;
    if (evaluations_done && linger_until == Clock::time_point{})
      linger_until =
          now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.linger_s));
    if (evaluations_done && ((service.all_delivered() && shared.writing == 0) || now >= linger_until)) {
      fmt::print(stderr, "ptxbench serve: drained ({}; {} verdict(s) not fetched), exiting\n",
                 service.idle() ? "every accepted evaluation finished" : "drain time over",
                 service.undelivered());
      listener->close();
      ioc.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(100));
    drain_timer.async_wait([&](beast::error_code e) {
      if (!e) check_drain();
    });
  };
  std::function<void(beast::error_code, int)> on_signal = [&](beast::error_code e, int signo) {
    if (e) return;
    if (draining) {
      fmt::print(stderr, "ptxbench serve: second signal {}, stopping now\n", signo);
      exit_code = 130;
      listener->close();
      ioc.stop();
      return;
    }
    draining = true;
    service.begin_drain();
    drain_until = Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.drain_s));
    fmt::print(stderr, "ptxbench serve: signal {}: no new submissions; finishing the accepted ones\n", signo);
    signals.async_wait(on_signal);
    check_drain();
  };
  signals.async_wait(on_signal);
  ioc.run();
  std::lock_guard lock(shared.gate->mutex);
  shared.gate->open = false;
  return exit_code;
}

}  // namespace ptxbench::serve
