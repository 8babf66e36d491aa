// Files and directories written whole or not at all, inside a directory that may hold anything (links a colleague
// or an attacker left there): written under a temporary name of this process, then renamed over the target, so that
// a reader sees the old version or the whole new one, a symbolic link at the target is replaced rather than
// followed, and two processes writing the same target never write into one file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <csignal>

namespace xgrad::platform {

/// A name in `dir` that no other process and no other call in this one uses: "." + `name` + ".tmp-" + this process's
/// id + "-" + a counter. The leading '.' and ".tmp-" mark a cut write for the cleaners (prepare_run_directory,
/// remove_abandoned_temporaries).
std::filesystem::path temporary_path(const std::filesystem::path& dir, const std::string& name);

/// Creates the new file `path` for writing (O_CREAT | O_EXCL | O_NOFOLLOW: never an existing file nor a link's
/// target) and returns its descriptor. Throws std::runtime_error "cannot create PATH: <strerror>".
int create_new_file(const std::filesystem::path& path);

/// A file written beside `target` under temporary_path and renamed over it by commit(). The destructor deletes the
/// temporary file unless commit() was reached. Errors throw std::runtime_error naming `target` and the system's
/// reason ("writing out/explain.md failed: No space left on device"); a directory at `target` is refused by the
/// constructor, before anything is written.
class StagedFile {
 public:
  explicit StagedFile(std::filesystem::path target);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  /// Appends `bytes`.
  void write(std::string_view bytes);
  /// Flushes the file to disk and closes it: after it, the file is whole and commit() needs no space.
  void finish();
  /// finish() if not done yet, then renames the file over the target.
  void commit();

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temporary() const { return temporary_; }

 private:
  std::filesystem::path target_, temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Writes `bytes` to `target` through a StagedFile.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

/// A directory built beside `target` under temporary_path (created empty, never an existing one) and swapped with it
/// by commit(). The destructor removes the new directory unless committed, and the replaced one after a commit.
class StagedDirectory {
 public:
  /// Throws std::runtime_error naming the directory and the reason when it cannot be created.
  explicit StagedDirectory(std::filesystem::path target);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  /// Where to build the new contents.
  const std::filesystem::path& path() const { return temporary_; }
  const std::filesystem::path& target() const { return target_; }
  /// Moves what is at the target (a directory, a file or a link: the entry itself, never what a link names) aside
  /// and the new directory into its place. Throws std::runtime_error naming the target.
  void commit();
  /// After commit(): moves the new directory out again (the destructor removes it) and what was at the target back,
  /// for a group of renames that failed after this one. Throws std::runtime_error naming the target.
  void undo();

 private:
  std::filesystem::path target_, temporary_, replaced_;
  bool committed_ = false;
};

/// An exclusive lock (flock) on the directory `dir` for its lifetime, where its file system has locks, for a group of
/// renames and deletions in it that two processes at once would interleave. Where there are none (NFS does not lock
/// a directory), or `dir` cannot be opened, it holds nothing: each write stays whole, in a temporary file of its own.
/// Waits while another process holds the lock.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::filesystem::path& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

/// Holds SIGINT, SIGTERM and SIGHUP back for its lifetime, from every thread of the process (a stop signal that
/// arrives is recorded and raised again when the hold ends, with the disposition the process had), so that a group of
/// renames is done whole: a stop leaves all the old files or all the new ones. One hold at a time per process (holds
/// may nest in one thread).
class StopSignalsHeld {
 public:
  StopSignalsHeld();
  ~StopSignalsHeld();
  StopSignalsHeld(const StopSignalsHeld&) = delete;
  StopSignalsHeld& operator=(const StopSignalsHeld&) = delete;

 private:
  sigset_t previous_mask_;
  struct sigaction previous_actions_[3];
};

/// Removes the entries of `dir` (files or directories) that temporary_path named for a process that no longer
/// exists: what a killed writer left. Entries of live processes, and errors, are left alone.
void remove_abandoned_temporaries(const std::filesystem::path& dir);

/// "<what> failed: <strerror(errno)>", for the messages of failed system calls.
std::string system_error_text(const std::string& what);

}  // namespace xgrad::platform
