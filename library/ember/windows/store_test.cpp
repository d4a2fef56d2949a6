// Native store test: one process runs the server thread and several client threads,
// checks every operation, timeouts, and that garbage bytes do not hurt other clients.
// Prints "store_test: OK" and exits 0 on success.
#include <atomic>
#include <cstdio>
#include <cstdlib>
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
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
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

  if (failures) {
    std::printf("store_test: %d FAILED\n", failures);
    return 1;
  }
  std::printf("store_test: OK\n");
  return 0;
}
