// Member-wise equality of the protocol's structs (the round-trip test compares with it). Defaulted
// comparisons need C++20; the worker's CUDA sources include these headers as C++17 and go without.
#pragma once

#if __cplusplus >= 202002L
#define PTXBENCH_PROTOCOL_EQUALITY(Type) bool operator==(const Type &) const = default;
#else
#define PTXBENCH_PROTOCOL_EQUALITY(Type)
#endif
