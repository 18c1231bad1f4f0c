// Token files: data::prepare_corpus as `strata data prepare` runs it, and GPT-2's byte-level BPE
// (encode/decode) for prompts and samples.
#include "framework/data/corpus.hpp"
#include "framework/data/bpe.hpp"
#include "framework/data/prepare.hpp"
#include "framework/data/token_file.hpp"
#include "python/bindings/bindings.hpp"

namespace strata::python {

void register_data(py::module_& m) {
  m.def(
      "prepare",
      [](const std::vector<std::string>& inputs, const std::string& output, double val_fraction,
         const std::string& tokenized, std::uint64_t vocab_size, const std::string& tokenizer,
         const std::string& vocab, const std::string& merges) {
        data::PrepareOptions o;
        o.inputs = inputs;
        o.output_prefix = output;
        o.val_fraction = val_fraction;
        o.tokenized_dtype = tokenized;
        o.vocab_size = vocab_size;
        o.tokenizer = tokenizer;
        o.vocab_path = vocab;
        o.merges_path = merges;
        data::PrepareResult r;
        {
          py::gil_scoped_release release;
          r = data::prepare_corpus(o);
        }
        py::dict d;
        d["files"] = r.files;
        d["train"] = r.train_path;
        d["valid"] = r.val_path;
        d["train_tokens"] = r.train_tokens;
        d["valid_tokens"] = r.val_tokens;
        d["vocab_size"] = r.vocab_size;
        d["bytes_per_token"] = r.bytes_per_token;
        return d;
      },
      py::arg("inputs"), py::arg("output"), py::arg("val_fraction"), py::arg("tokenized"),
      py::arg("vocab_size"), py::arg("tokenizer"), py::arg("vocab"), py::arg("merges"));
  m.def(
      "token_file_info",
      [](const std::string& path) {
        const data::TokenFile f(path);
        py::dict d;
        d["tokens"] = f.size();
        d["vocab_size"] = f.vocab_size();
        return d;
      },
      py::arg("path"));
  py::class_<data::BpeTokenizer>(m, "BpeTokenizer")
      .def_static("load_gpt2", &data::BpeTokenizer::load_gpt2, py::arg("vocab"), py::arg("merges"))
      .def_property_readonly("vocab_size", &data::BpeTokenizer::vocab_size)
      .def("encode", [](data::BpeTokenizer& t, const std::string& text) { return t.encode(text); })
      .def("decode", [](const data::BpeTokenizer& t, const std::vector<std::uint32_t>& ids) {
        return py::bytes(t.decode(ids));
      });
}

}  // namespace strata::python
