// Crash-safe file operations for the commit protocol: fsync of files and directories, rename that
// survives a power cut, and whole-file writes that are all-or-nothing (temporary name, fsync,
// rename, fsync of the directory).
#pragma once

#include <string>

namespace strata::checkpoint {

// Flushes a file's data (and metadata) to stable storage.
void fsync_file(const std::string& path);
// Flushes a directory's entries (makes creations and renames inside it durable).
void fsync_dir(const std::string& dir);
// rename(from, to), then fsync of to's directory.
void rename_durable(const std::string& from, const std::string& to);
// Writes content to path.tmp, fsyncs it, renames it over path and fsyncs the directory.
void write_file_atomic(const std::string& path, const std::string& content);
// Whole file as a string; throws strata::Error naming the file.
std::string read_text_file(const std::string& path);
// mkdir -p; an existing directory is fine, an existing non-directory is an error.
void make_dirs(const std::string& dir);
// Directory containing path ("." for a bare name).
std::string parent_dir(const std::string& path);

}  // namespace strata::checkpoint
