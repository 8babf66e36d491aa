// All differentiable ops, one header per family. Each op is a free function template instantiated for float and
// double; its forward and backward stand side by side in the matching ops_*.cpp. Every op throws xgrad::Error
// naming itself and the offending shapes on bad input. Broadcasting follows NumPy.
#pragma once

#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_nn.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
