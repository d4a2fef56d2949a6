// Fuzz harness for the model loader. Built two ways:
//  * with clang -fsanitize=fuzzer (EMBER_LITE_LIBFUZZER defined): libFuzzer drives
//    LLVMFuzzerTestOneInput;
//  * otherwise (g++ here) with its own deterministic mutation driver in main(), so that
//    the same checks run in ctest under ASan/UBSan and under qemu.
// Every input is tried as is and with its size field and CRC trailer repaired, because a
// raw mutation almost always stops at the checksum and would never reach the structural
// checks behind it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "crc32.h"
#include "ember_lite.h"
#include "model.h"

namespace {

uint64_t status_counts[16];

void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// Bounded cost estimate so that a mutated but valid model with huge shapes is not run.
double run_cost(const ember_lite::Model& model) {
  double cost = 0;
  for (const auto& op : model.ops) {
    double per = 1;
    if (op.code == ember_lite::OpCode::kLinear) per = static_cast<double>(op.input_shape.back());
    if (op.code == ember_lite::OpCode::kConv2d) {
      const auto& w = model.tensors[op.tensors[0]].shape;
      per = static_cast<double>(w[1] * w[2] * w[3]);
    }
    cost += per * static_cast<double>(ember_lite::numel(op.output_shape));
  }
  return cost;
}

// Every buffer an accepted model needs is within EL_MAX_BUFFER_BYTES, computed here in
// long double so that the check cannot share an overflow with the loader's own arithmetic.
void check_buffer_limit(const ember_lite::Model& model) {
  const long double limit = static_cast<long double>(EL_MAX_BUFFER_BYTES);
  auto bytes = [](const ember_lite::Shape& shape) {
    long double n = 4;
    for (int64_t d : shape) n *= static_cast<long double>(d);
    return n;
  };
  if (bytes(model.input_shape) > limit) fail("accepted an input over EL_MAX_BUFFER_BYTES");
  for (const auto& tensor : model.tensors) {
    if (bytes(tensor.shape) > limit) fail("accepted a tensor over EL_MAX_BUFFER_BYTES");
  }
  for (const auto& op : model.ops) {
    if (bytes(op.output_shape) > limit) fail("accepted an activation over EL_MAX_BUFFER_BYTES");
    if (op.code == ember_lite::OpCode::kConv2d) {
      const auto& w = model.tensors[op.tensors[0]].shape;
      if (bytes({w[1], w[2], w[3], op.output_shape[2], op.output_shape[3]}) > limit) {
        fail("accepted a conv2d whose im2col buffer is over EL_MAX_BUFFER_BYTES");
      }
    }
  }
}

void check_one(const uint8_t* data, size_t size) {
  el_model* model = nullptr;
  char errbuf[EL_ERRBUF_SIZE];
  std::memset(errbuf, 'x', sizeof errbuf);
  const int status = el_model_load_buffer(data, size, &model, errbuf, sizeof errbuf);
  if (status < 0 || status > EL_ERR_TOO_LARGE) fail("unknown status code");
  ++status_counts[status];
  if (std::memchr(errbuf, 0, sizeof errbuf) == nullptr) fail("errbuf not NUL-terminated");
  if (status != EL_OK) {
    if (model != nullptr) fail("model set on failure");
    if (errbuf[0] == 0 || el_last_error()[0] == 0) fail("failure without a message");
    if (status == EL_ERR_INTERNAL || status == EL_ERR_INVALID_ARGUMENT) fail("loader internal error");
    return;
  }
  if (model == nullptr) fail("EL_OK without a model");
  ember_lite::Model parsed;
  if (ember_lite::parse_model(data, size, parsed).status != EL_OK) fail("parse disagrees with C API");
  check_buffer_limit(parsed);
  if (run_cost(parsed) < 2e7) {
    std::vector<float> input(el_model_input_numel(model), 0.5f);
    std::vector<float> output(el_model_output_numel(model));
    const int run = el_model_run(model, input.data(), input.size(), output.data(), output.size());
    if (run != EL_OK) fail("valid model failed to run");
  }
  el_model_free(model);
}

void repair(std::vector<uint8_t>& bytes) {
  if (bytes.size() < 132) return;
  const uint64_t size = bytes.size();
  for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<uint8_t>(size >> (8 * i));
  const uint32_t crc = ember_lite::crc32(bytes.data(), bytes.size() - 4);
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_one(size == 0 ? reinterpret_cast<const uint8_t*>("") : data, size);
  std::vector<uint8_t> repaired(data, data + size);
  repair(repaired);
  if (!repaired.empty()) check_one(repaired.data(), repaired.size());
  return 0;
}

#ifndef EMBER_LITE_LIBFUZZER
namespace {

struct Rng {  // xorshift64*: deterministic across platforms
  uint64_t state;
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ull;
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

const uint64_t kInteresting[] = {0, 1, 2, 3, 4, 6, 7, 63, 64, 127, 128, 255, 1024, 4096,
                                 0x7FFFFFFFull, 0x80000000ull, 0xFFFFFFFFull,
                                 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull,
                                 0xFFFFFFFFFFFFFFFFull};

void mutate(std::vector<uint8_t>& bytes, Rng& rng) {
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    switch (rng.below(6)) {
      case 0:  // flip a bit
        if (!bytes.empty()) bytes[rng.below(bytes.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1: {  // overwrite an aligned 4- or 8-byte field in the header or tables
        const size_t width = rng.below(2) ? 8 : 4;
        const size_t limit = bytes.size() < 1024 ? bytes.size() : 1024;
        if (limit < width) break;
        const size_t at = rng.below(limit / width) * width;
        uint64_t value = kInteresting[rng.below(sizeof kInteresting / sizeof kInteresting[0])];
        if (rng.below(3) == 0) value = ~value + 1;  // two's complement negation, no UB
        for (size_t i = 0; i < width; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
        break;
      }
      case 2:  // truncate
        bytes.resize(rng.below(bytes.size() + 1));
        break;
      case 3:  // append
        bytes.resize(bytes.size() + 1 + rng.below(200), static_cast<uint8_t>(rng.next()));
        break;
      case 4:  // random byte
        if (!bytes.empty()) bytes[rng.below(bytes.size())] = static_cast<uint8_t>(rng.next());
        break;
      default: {  // copy a chunk over another place
        if (bytes.size() < 16) break;
        const size_t len = 1 + rng.below(64);
        const size_t from = rng.below(bytes.size() - 8);
        const size_t to = rng.below(bytes.size() - 8);
        for (size_t i = 0; i < len && from + i < bytes.size() && to + i < bytes.size(); ++i) {
          bytes[to + i] = bytes[from + i];
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20000;
  uint64_t seed = 0x454D424552ull;
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::strtol(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::ifstream file(arg, std::ios::binary);
      if (!file) {
        std::fprintf(stderr, "cannot read seed file %s\n", arg.c_str());
        return 2;
      }
      seeds.emplace_back((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--iterations N] [--seed S] seed.elm...\n", argv[0]);
    return 2;
  }
  // Exhaustive part: every truncation length and every header byte of every seed.
  for (const auto& original : seeds) {
    for (size_t len = 0; len < original.size(); ++len) {
      LLVMFuzzerTestOneInput(original.data(), len);
    }
    for (size_t at = 0; at < 128 && at < original.size(); ++at) {
      for (int value : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
        std::vector<uint8_t> bytes = original;
        bytes[at] = static_cast<uint8_t>(value);
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      }
    }
  }
  Rng rng{seed | 1};
  for (long i = 0; i < iterations; ++i) {
    std::vector<uint8_t> bytes = seeds[rng.below(seeds.size())];
    mutate(bytes, rng);
    LLVMFuzzerTestOneInput(bytes.empty() ? nullptr : bytes.data(), bytes.size());
  }
  std::printf("fuzz: %ld random inputs, statuses:", iterations);
  for (int s = 0; s <= EL_ERR_TOO_LARGE; ++s) {
    if (status_counts[s]) std::printf(" %s=%llu", el_status_name(s), static_cast<unsigned long long>(status_counts[s]));
  }
  std::printf("\n");
  // The repaired inputs must reach past the checksum, or the run proved little.
  const uint64_t structural = status_counts[EL_ERR_MALFORMED] + status_counts[EL_ERR_SHAPE] +
                              status_counts[EL_ERR_BAD_OPCODE] + status_counts[EL_ERR_TOO_LARGE] +
                              status_counts[EL_OK];
  if (structural == 0) {
    std::fprintf(stderr, "no input reached the structural checks\n");
    return 1;
  }
  return 0;
}
#endif
