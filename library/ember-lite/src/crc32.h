#pragma once
#include <cstddef>
#include <cstdint>

namespace ember_lite {
// CRC-32 (IEEE, reflected 0xEDB88320, as zlib's crc32) of data[0, size).
uint32_t crc32(const uint8_t* data, size_t size);
}  // namespace ember_lite
