// The CPU dialect's lanes for real execution (the extension, csrc/): a warp is one lane, so a CPU
// thread runs a whole warp's share of the LM head (kernels/matvec.h) and the cross-lane sum is
// the value itself; the compiler vectorizes each lane's runs of 16 values instead.
#pragma once
#include "lane_ops_cpu.h"

enum { muser_warp_lanes = 1 };  // kernels/matvec.h: warp_lanes

inline float muser_sum(float v) { return v; }
