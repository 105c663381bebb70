# Cross build for arm64 with Debian 12's multiarch packages (scripts/setup --arm64 installs them:
# crossbuild-essential-arm64, the :arm64 development packages, qemu-user-static). Used by
# scripts/build-arm64:  cmake -S . -B DIR --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
#
# The arm64 libraries live beside the host's in /usr/lib/aarch64-linux-gnu (multiarch), so there
# is no sysroot: CMake's search finds them through CMAKE_LIBRARY_ARCHITECTURE, pkg-config through
# PKG_CONFIG_LIBDIR below. The header-only packages (toml11, CLI11, nlohmann-json) are arch all.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Never the host's x86 libraries or CMake packages: only the arm64 ones, and the arch-all ones
# in /usr/share (their CMake configs name no library).
set(CMAKE_FIND_ROOT_PATH /usr/lib/aarch64-linux-gnu /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_IGNORE_PREFIX_PATH /usr/lib/x86_64-linux-gnu)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest (and the tests' scripts, through $<TARGET_FILE:...>-free launchers, see tests/README.md)
# run the arm64 programs under qemu-user: no binfmt_misc registration is needed (a container or a
# CI machine may have none). -L: the arm64 dynamic loader and libc of libc6-arm64-cross; what is
# not there (libfmt, libsystemd, ...) qemu reads from the multiarch paths of the host's root.
find_program(IOMMUD_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64
             DOC "qemu-user for aarch64 (qemu-user-static)")
if(IOMMUD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${IOMMUD_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
