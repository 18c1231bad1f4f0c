// cuda_emu_rewrite IN.cu OUT.cpp: turns a CUDA source into C++ for the emulator (README.md).
// Only two constructs are not C++ and are rewritten; everything else is left to the stand-in
// cuda_runtime.h, and the line numbers are kept (a #line directive names the .cu file), so
// compiler messages and sanitizer reports point into the original.
//   kernel<<<grid, block[, smem[, stream]]>>>(args);
//       -> ::emu::Launch(grid, block, smem, stream).bounds(B).run(kernel, "kernel", args);
//          (.bounds(B) when the kernel was declared with __launch_bounds__(B) in this file)
//   [static] __shared__ T name[dims];   -> per-block storage from the emulator
//   extern __shared__ T name[];         -> the launch's dynamic shared memory
// Anything it cannot parse (a launch or a __shared__ left over, several declarators, an
// initialiser) is an error: it exits 1 and the build fails.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string g_path;

[[noreturn]] void die(const std::string& src, std::size_t at, const std::string& what) {
  int line = 1;
  for (std::size_t i = 0; i < at && i < src.size(); ++i) line += src[i] == '\n';
  std::cerr << g_path << ":" << line << ": cuda_emu_rewrite: " << what << "\n";
  std::exit(1);
}

// code[i]: whether src[i] is code (not inside a comment, a string or a character literal).
std::vector<bool> code_mask(const std::string& s) {
  std::vector<bool> m(s.size(), true);
  std::size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') m[i++] = false;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t e = s.find("*/", i + 2);
      const std::size_t end = e == std::string::npos ? s.size() : e + 2;
      while (i < end) m[i++] = false;
    } else if (s[i] == '"' || s[i] == '\'') {
      // (no raw strings in kernel sources; a digit separator ' inside a number is not a quote)
      if (s[i] == '\'' && i > 0 && std::isalnum(static_cast<unsigned char>(s[i - 1]))) {
        ++i;
        continue;
      }
      const char q = s[i];
      m[i++] = false;
      while (i < s.size() && s[i] != q) {
        if (s[i] == '\\') m[i++] = false;
        if (i < s.size()) m[i++] = false;
      }
      if (i < s.size()) m[i++] = false;
    } else {
      ++i;
    }
  }
  return m;
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// The text with every run of whitespace as one space (for text moved onto another line).
std::string one_line(const std::string& s) {
  std::string r;
  bool sp = false;
  for (char c : trim(s)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      sp = true;
      continue;
    }
    if (sp) r += ' ';
    sp = false;
    r += c;
  }
  return r;
}

std::string newlines_of(const std::string& s) {
  std::string r;
  for (char c : s)
    if (c == '\n') r += '\n';
  return r;
}

// Finds `tok` as code at or after `from`, as a whole word when it is an identifier.
std::size_t find_code(const std::string& s, const std::vector<bool>& m, const std::string& tok,
                      std::size_t from) {
  for (std::size_t i = s.find(tok, from); i != std::string::npos; i = s.find(tok, i + 1)) {
    if (!m[i]) continue;
    if (ident(tok[0])) {
      if (i > 0 && ident(s[i - 1])) continue;
      if (i + tok.size() < s.size() && ident(s[i + tok.size()])) continue;
    }
    return i;
  }
  return std::string::npos;
}

// The index just after the bracket matching the one at `open` ((, [, {, <), skipping non-code.
std::size_t match_forward(const std::string& s, const std::vector<bool>& m, std::size_t open) {
  const char o = s[open];
  const char c = o == '(' ? ')' : o == '[' ? ']' : o == '{' ? '}' : '>';
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (!m[i]) continue;
    if (s[i] == o) ++depth;
    if (s[i] == c && --depth == 0) return i + 1;
  }
  die(s, open, std::string("no matching ") + c);
}

std::size_t skip_space(const std::string& s, std::size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

struct Edit {
  std::size_t begin, end;
  std::string text;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_emu_rewrite IN.cu OUT.cpp\n";
    return 2;
  }
  g_path = argv[1];
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "cuda_emu_rewrite: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  const std::vector<bool> m = code_mask(s);
  std::vector<Edit> edits;

  // __launch_bounds__(B) name: remembered for the launches of `name`.
  std::map<std::string, std::string> bounds;
  for (std::size_t i = find_code(s, m, "__launch_bounds__", 0); i != std::string::npos;
       i = find_code(s, m, "__launch_bounds__", i + 1)) {
    const std::size_t open = skip_space(s, i + 17);
    if (s[open] != '(') die(s, i, "__launch_bounds__ without (");
    const std::size_t close = match_forward(s, m, open);
    std::size_t n = skip_space(s, close);
    std::size_t e = n;
    while (e < s.size() && ident(s[e])) ++e;
    if (e == n) die(s, i, "__launch_bounds__ not followed by the kernel's name");
    bounds[s.substr(n, e - n)] = one_line(s.substr(open + 1, close - open - 2));
  }

  // Launches.
  int launches = 0;
  for (std::size_t i = find_code(s, m, "<<<", 0); i != std::string::npos;
       i = find_code(s, m, "<<<", i + 3)) {
    // The kernel: [ns::]name[<template args>] just before <<<.
    std::size_t k = i;
    while (k > 0 && std::isspace(static_cast<unsigned char>(s[k - 1]))) --k;
    std::size_t kend = k;
    if (k > 0 && s[k - 1] == '>') {
      int depth = 0;
      std::size_t j = k;
      while (j > 0) {
        --j;
        if (!m[j]) continue;
        if (s[j] == '>') ++depth;
        if (s[j] == '<' && --depth == 0) break;
      }
      if (depth != 0) die(s, i, "unbalanced template arguments before <<<");
      k = j;
    }
    const std::size_t name_end = k;
    while (k > 0 && (ident(s[k - 1]) || s[k - 1] == ':')) --k;
    if (k == name_end) die(s, i, "no kernel name before <<<");
    const std::string kernel = s.substr(k, kend - k);
    std::string base = s.substr(k, name_end - k);
    if (const std::size_t c = base.rfind("::"); c != std::string::npos) base = base.substr(c + 2);
    // The configuration, up to >>> outside brackets.
    std::size_t j = i + 3;
    int depth = 0;
    std::size_t cfg_end = std::string::npos;
    for (; j + 2 < s.size(); ++j) {
      if (!m[j]) continue;
      const char c = s[j];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (depth == 0 && s.compare(j, 3, ">>>") == 0) {
        cfg_end = j;
        break;
      }
    }
    if (cfg_end == std::string::npos) die(s, i, "<<< without >>>");
    const std::string cfg = s.substr(i + 3, cfg_end - i - 3);
    const std::size_t open = skip_space(s, cfg_end + 3);
    if (s[open] != '(') die(s, i, "no argument list after >>>");
    const std::size_t close = match_forward(s, m, open);
    const std::size_t semi = skip_space(s, close);
    if (s[semi] != ';') die(s, i, "a launch that is not a statement of its own");
    std::string args = s.substr(open + 1, close - open - 2);
    std::string text = "::emu::Launch(" + cfg + ")";
    if (auto b = bounds.find(base); b != bounds.end()) text += ".bounds(" + b->second + ")";
    text += ".run(" + kernel + ", \"" + one_line(kernel) + "\"";
    if (!trim(args).empty()) text += ", " + args;
    text += ")";
    // Keep the line count: the moved pieces keep their own newlines; the gap ones are appended.
    const std::string gaps = newlines_of(s.substr(kend, i - kend)) +
                             newlines_of(s.substr(cfg_end, open - cfg_end));
    edits.push_back({k, close, text + gaps});
    ++launches;
    i = close;
  }

  // __shared__ declarations.
  int shared = 0;
  for (std::size_t i = find_code(s, m, "__shared__", 0); i != std::string::npos;
       i = find_code(s, m, "__shared__", i + 1)) {
    std::size_t begin = i;
    bool is_extern = false;
    // A preceding `extern` or `static` belongs to the declaration.
    for (const char* kw : {"extern", "static"}) {
      std::size_t p = begin;
      while (p > 0 && std::isspace(static_cast<unsigned char>(s[p - 1]))) --p;
      const std::size_t len = std::string(kw).size();
      if (p >= len && s.compare(p - len, len, kw) == 0 && (p == len || !ident(s[p - len - 1]))) {
        begin = p - len;
        if (std::string(kw) == "extern") is_extern = true;
      }
    }
    const std::size_t semi = s.find(';', i);
    if (semi == std::string::npos) die(s, i, "__shared__ declaration without ;");
    const std::string decl = s.substr(i + 10, semi - i - 10);
    if (decl.find(',') != std::string::npos || decl.find('=') != std::string::npos ||
        decl.find('{') != std::string::npos)
      die(s, i, "only `__shared__ T name[dims];` declarations are emulated (one name, no "
                "initialiser)");
    const std::size_t bracket = decl.find('[');
    const std::string head = trim(decl.substr(0, bracket));
    const std::string dims = bracket == std::string::npos ? "" : one_line(decl.substr(bracket));
    std::size_t ne = head.size(), nb = ne;
    while (nb > 0 && ident(head[nb - 1])) --nb;
    const std::string name = head.substr(nb, ne - nb);
    const std::string type = one_line(head.substr(0, nb));
    if (name.empty() || type.empty()) die(s, i, "cannot parse the __shared__ declaration");
    std::string text;
    if (is_extern) {
      if (dims != "[]") die(s, i, "extern __shared__ must be an array of unknown size");
      text = type + "* " + name + " = ::emu::dyn_smem<" + type + ">()";
    } else {
      text = "static char cuda_emu_key_" + name + "; auto& " + name + " = ::emu::static_shared<" +
             type + (dims.empty() ? "" : " ") + dims + ">(&cuda_emu_key_" + name + ")";
    }
    edits.push_back({begin, semi, text + newlines_of(s.substr(begin, semi - begin))});
    ++shared;
  }

  // Apply (edits do not overlap: a launch has no __shared__ inside).
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
  std::string out;
  out += "// Generated by cuda_emu_rewrite from " + g_path + ": do not edit.\n";
  out += "#include \"cuda_emu/device_prelude.hpp\"\n";
  out += "#line 1 \"" + g_path + "\"\n";
  std::size_t pos = 0;
  for (const Edit& e : edits) {
    if (e.begin < pos) die(s, e.begin, "overlapping rewrites");
    out += s.substr(pos, e.begin - pos);
    out += e.text;
    pos = e.end;
  }
  out += s.substr(pos);

  // Nothing may be left over.
  const std::vector<bool> m2 = code_mask(out);
  for (const char* tok : {"<<<", ">>>", "__shared__"}) {
    const std::size_t at = find_code(out, m2, tok, 0);
    if (at != std::string::npos) {
      std::cerr << g_path << ": cuda_emu_rewrite: `" << tok << "` left after rewriting\n";
      return 1;
    }
  }
  std::ofstream o(argv[2], std::ios::binary);
  o << out;
  if (!o) {
    std::cerr << "cuda_emu_rewrite: cannot write " << argv[2] << "\n";
    return 1;
  }
  std::printf("cuda_emu_rewrite: %s: %d launches, %d __shared__ declarations\n", argv[1], launches,
              shared);
  return 0;
}
