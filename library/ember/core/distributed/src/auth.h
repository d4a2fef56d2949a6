// Peer authentication shared by the store and the process group: HMAC-SHA256 over a fresh
// random nonce, so a connection proves it knows the job's secret without sending it, and a
// recorded answer is worthless for the next connection (whose nonce differs).
// SHA-256 is implemented here so the core needs no crypto library (Linux, macOS, mingw).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::distributed::auth {

constexpr size_t kNonceSize = 32;
constexpr size_t kMacSize = 32;
using Digest = std::array<unsigned char, kMacSize>;

Digest sha256(const std::string& data);
// HMAC-SHA256 (RFC 2104) of `message` under `key`.
Digest hmac_sha256(const std::string& key, const std::string& message);
// kNonceSize bytes from the operating system's random source.
std::string random_nonce();
// Compares in time independent of where the inputs differ.
bool equal_digests(const unsigned char* a, const unsigned char* b, size_t size);
inline std::string as_string(const Digest& d) { return std::string(d.begin(), d.end()); }

// True for a loopback address in numeric form: IPv4 127.0.0.0/8, IPv6 ::1, and 127.0.0.0/8
// mapped into IPv6 (::ffff:127.x.y.z).
bool is_loopback(const std::string& address);

}  // namespace ember::distributed::auth
