// A toy C++ trainer (libtorch/ONNX Runtime style) that dies of an uncaught exception.
// Modes: throw (std::runtime_error escapes main), healthy (catches one, exits 0).
#include <cstdio>
#include <stdexcept>
#include <string>
static void load(const std::string &p) { throw std::runtime_error("open failed: " + p); }
int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "healthy";
  for (int s = 0; s < 3; ++s) std::printf("step %d loss %.4f\n", s, 2.0 / (s + 1));
  std::fflush(stdout);
  if (mode == "throw") load("weights.bin");
  try { load("optional.bin"); } catch (const std::exception &e) { std::printf("warning: what(): %s (ignored)\n", e.what()); }
  std::printf("done\n");
}
