// A full disk for a test: a small tmpfs, so that writes fail with the kernel's own ENOSPC ("No space left on
// device"), exactly as on a disk or quota that fills up while xgrad writes.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

namespace xgrad::testing {

/// A tmpfs of `bytes` mounted on `dir` in a mount namespace of this test process's own (the processes it starts
/// share it), unmounted by the destructor. ok() is false where the test cannot mount (not root, no namespaces): the
/// test then fails saying why (a full disk cannot be made without them, and a skipped test would assert nothing).
class SmallDisk {
 public:
  SmallDisk(const std::filesystem::path& dir, std::size_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string what = "a full disk is a tmpfs mounted in a mount namespace of the test's own: ";
    if (::unshare(CLONE_NEWNS) != 0) {
      why_ = what + "run the tests as root (unshare(CLONE_NEWNS): " + std::strerror(errno) + ")";
      return;
    }
    // Private, so that the mount never shows outside this process's namespace. Where '/' is no mount point (a
    // chroot) it cannot be made private, and a mount under it could reach other namespaces: no full disk there.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      why_ = what + (errno == EINVAL ? "'/' is not a mount point here (a chroot?): run the tests on a machine, a VM "
                                       "or a container"
                                     : std::string("run the tests as root (mount: ") + std::strerror(errno) + ")");
      return;
    }
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + std::to_string(bytes)).c_str()) != 0) {
      why_ = what + "mount tmpfs: " + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }

  /// Fills the disk until `left` bytes are free (a file "fill" of the rest). tmpfs counts whole pages (4096 bytes):
  /// a file of 1 to 4096 bytes takes one.
  void fill_leaving(std::size_t left) const {
    std::filesystem::remove(dir_ / "fill");
    struct statvfs s {};
    REQUIRE(::statvfs(dir_.c_str(), &s) == 0);
    const std::size_t free = static_cast<std::size_t>(s.f_bavail) * s.f_frsize;
    std::ofstream out(dir_ / "fill", std::ios::binary);
    const std::string block(4096, 'x');
    for (std::size_t n = 0; n + left + block.size() <= free; n += block.size()) out << block;
  }
  /// Frees what fill_leaving took.
  void empty_fill() const { std::filesystem::remove(dir_ / "fill"); }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string why_;
};

}  // namespace xgrad::testing
