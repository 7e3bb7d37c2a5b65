// cuBLAS is loaded at the first call into it (cublas_on_demand.cpp), not with the program.
#pragma once

namespace scalescope {

// Whether this process has loaded cuBLAS: a call into it has been made.
bool cublas_loaded();

}  // namespace scalescope
