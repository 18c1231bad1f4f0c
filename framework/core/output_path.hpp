// Checks on where a program is about to write, made before any work: an output file must be a
// regular file or not exist yet (an output written under a temporary name and renamed over a
// device, directory, FIFO or socket would replace it), and the directory it goes to must take
// new files. Failures are UserErrors that say what is wrong with the path.
#pragma once

#include <string>
#include <string_view>

namespace strata {

// `path` for an output file (`what` names it in messages: "--output", "the metrics file").
// Throws UserError("[tag] ...") when path exists and is not a regular file, or its directory
// does not exist or refuses new files.
void check_output_file(const std::string& path, const std::string& tag, std::string_view what);

// `path` for an output directory (created later if missing): it must be a directory, or not
// exist under an existing ancestor directory that takes new entries. Throws UserError.
void check_output_dir(const std::string& path, const std::string& tag, std::string_view what);

// "a character device", "a directory", ... for messages; "" for a regular file or no file.
std::string file_kind(const std::string& path);

}  // namespace strata
