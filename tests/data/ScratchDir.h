// A temporary directory for files a test writes, removed with everything in it at the end.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::data::testing {

class ScratchDir {
public:
  ScratchDir() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("prism-data-test", dir));
    dir_ = std::string(dir);
  }
  ~ScratchDir() { llvm::sys::fs::remove_directories(dir_); }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  const std::string &path() const { return dir_; }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  // Writes `bytes` to the file `name` and returns its path.
  std::string write(llvm::StringRef name, llvm::StringRef bytes) const {
    std::string p = file(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    EXPECT_FALSE(ec) << p << ": " << ec.message();
    os << bytes;
    return p;
  }

private:
  std::string dir_;
};

} // namespace prism::runtime::data::testing
