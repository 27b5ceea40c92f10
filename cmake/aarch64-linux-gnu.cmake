# Cross-compiling IRON for 64-bit ARM Linux on a Debian x86-64 host (scripts/test-arm64.sh):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The compiler is Debian's g++-aarch64-linux-gnu; the libraries IRON links are Debian's arm64
# packages installed beside the host's (multiarch: dpkg --add-architecture arm64, then e.g.
# libgtest-dev:arm64), and the programs run under qemu-aarch64 (qemu-user), which ctest calls.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Headers and libraries come from the cross compiler's own tree (its C library) and from the
# arm64 packages, whose libraries are in /usr/lib/aarch64-linux-gnu and whose headers and CMake
# files are the host's (/usr/include, /usr/share/cmake): so the root "/" too, searched for the
# aarch64-linux-gnu library directories alone (CMAKE_LIBRARY_ARCHITECTURE), never the host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # programs (python, for the fuzzers' seeds) run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (cpp-httplib) reads the arm64 packages' .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# Test programs (ctest, gtest_discover_tests) run under user-mode QEMU; QEMU_CPU in the
# environment picks the processor it emulates (scripts/test-arm64.sh: NEON alone, and SVE).
# Where the arm64 C library is installed (libc6:arm64, which every arm64 -dev package brings),
# programs run on it as on an arm64 Debian: its loader, /lib/ld-linux-aarch64.so.1, finds it and
# the other arm64 libraries. `-L /usr/aarch64-linux-gnu` (the cross compiler's tree) would give
# them that tree's loader instead, which still finds libc6:arm64's libc.so.6 first (in
# /lib/aarch64-linux-gnu): a loader and a libc of two glibc builds, which hung the tests.
# So -L only where the cross compiler's tree holds the only arm64 C library.
find_program(IRON_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static
  DOC "User-mode QEMU for aarch64 (Debian: qemu-user or qemu-user-static)")
if(IRON_QEMU_AARCH64 AND EXISTS /lib/ld-linux-aarch64.so.1)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${IRON_QEMU_AARCH64})
elseif(IRON_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${IRON_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
