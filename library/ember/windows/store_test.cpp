// Native store test: one process runs the server thread and several client threads,
// checks every operation, timeouts, and that garbage bytes do not hurt other clients.
// Prints "store_test: OK" and exits 0 on success.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ember/distributed/errors.h"
#include "ember/distributed/socket.h"
#include "ember/distributed/store.h"

using namespace ember::distributed;

static int failures = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::fprintf(stderr, "CHECK failed line %d: %s\n", __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
  } while (0)

int main() {
  StoreServer server("127.0.0.1", 0);
  const uint16_t port = server.port();
  StoreClient a("127.0.0.1", port, Milliseconds(5000));
  StoreClient b("127.0.0.1", port, Milliseconds(5000));

  a.set("alpha", std::string("one\0two", 7));
  CHECK(b.get("alpha") == std::string("one\0two", 7));
  CHECK(a.add("counter", 5) == 5);
  CHECK(b.add("counter", -2) == 3);
  CHECK(a.get("counter") == "3");
  CHECK(a.compare_set("cas", "", "first") == "first");
  CHECK(b.compare_set("cas", "wrong", "second") == "first");
  CHECK(b.compare_set("cas", "first", "second") == "second");
  CHECK(a.check({"alpha", "cas"}));
  CHECK(!a.check({"alpha", "nope"}));
  CHECK(a.delete_key("alpha"));
  CHECK(!a.check({"alpha"}));

  // A blocked get is released by another client's set.
  std::thread setter([port] {
    StoreClient c("127.0.0.1", port, Milliseconds(5000));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c.set("late", "value");
  });
  CHECK(b.get("late") == "value");
  setter.join();

  // Timeouts name the missing keys.
  bool timed_out = false;
  try {
    a.wait({"late", "never"}, Milliseconds(300));
  } catch (const TimeoutError& e) {
    timed_out = std::string(e.what()).find("never") != std::string::npos;
  }
  CHECK(timed_out);

  // Garbage: a raw socket writes junk; the server drops it and keeps serving others.
  {
    Socket junk = Socket::connect("127.0.0.1", port, Clock::now() + std::chrono::seconds(5), "junk");
    std::string bytes = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(4096, '\xff');
    junk.send_all(bytes.data(), bytes.size(), Clock::now() + std::chrono::seconds(5));
    // The server counts the rejection once its loop has read the junk: wait for that (a fixed
    // 200 ms bet on the server's thread running in time, which a loaded machine need not give),
    // with the connection still open.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (server.rejected_connections() < 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(server.rejected_connections() >= 1);
  a.set("after_garbage", "fine");
  CHECK(b.get("after_garbage") == "fine");

  // Many concurrent adders.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([port] {
      StoreClient c("127.0.0.1", port, Milliseconds(5000));
      for (int i = 0; i < 50; ++i) c.add("shared", 1);
    });
  for (auto& t : threads) t.join();
  CHECK(a.get("shared") == "200");

  // Authentication: a store with a token serves the clients that hold it and refuses, at
  // once and with a reason, those that hold another or none; a store without a token may
  // not listen beyond loopback.
  {
    const std::string token = "job-secret";
    StoreServer guarded("127.0.0.1", 0, token);
    StoreClient member("127.0.0.1", guarded.port(), Milliseconds(5000), token);
    member.set("k", "v");
    CHECK(member.get("k") == "v");
    CHECK(member.token() == token);
    for (const std::string& wrong : {std::string("job-secreT"), std::string()}) {
      bool refused = false;
      const auto start = Clock::now();
      try {
        StoreClient stranger("127.0.0.1", guarded.port(), Milliseconds(20000), wrong);
      } catch (const DistributedError& e) {
        refused = std::string(e.what()).find("authentication failed") != std::string::npos;
      }
      CHECK(refused);
      CHECK(Clock::now() - start < std::chrono::seconds(5));
    }
    CHECK(guarded.rejected_connections() == 2);
    CHECK(member.get("k") == "v");
    bool needs_token = false;
    try {
      StoreServer open_to_all("0.0.0.0", 0);
    } catch (const std::invalid_argument& e) {
      needs_token = std::string(e.what()).find("needs a token") != std::string::npos;
    }
    CHECK(needs_token);
  }

  if (failures) {
    std::printf("store_test: %d FAILED\n", failures);
    return 1;
  }
  std::printf("store_test: OK\n");
  return 0;
}
