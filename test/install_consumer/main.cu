// Install-consumer smoke test: compiles against the installed pagedattn
// package only. Host code only, so it runs without a GPU.
#include <pagedattn/version.cuh>

#include <cstdio>

#if !defined(PAGEDATTN_VERSION_MAJOR) || !defined(PAGEDATTN_VERSION_MINOR) || \
    !defined(PAGEDATTN_VERSION_PATCH)
#error "pagedattn/version.cuh must define PAGEDATTN_VERSION_MAJOR/MINOR/PATCH"
#endif

#if defined(EXPECTED_MAJOR)
static_assert(PAGEDATTN_VERSION_MAJOR == EXPECTED_MAJOR &&
                  PAGEDATTN_VERSION_MINOR == EXPECTED_MINOR &&
                  PAGEDATTN_VERSION_PATCH == EXPECTED_PATCH,
              "pagedattn/version.cuh disagrees with the CMake project VERSION");
#endif

int main() {
  std::printf("pagedattn consumer ok\n");
  return 0;
}
