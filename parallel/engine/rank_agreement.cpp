#include "parallel/engine/rank_agreement.hpp"

#include <nlohmann/json.hpp>

#include "framework/checkpoint/checkpoint_error.hpp"

namespace strata::parallel {

namespace {

using json = nlohmann::json;

// An exception as (kind, tag, message), so that another rank can raise the same one.
json describe(std::exception_ptr e) {
  auto body = [](const Error& x) { return std::string(x.what()).substr(x.tag().size() + 3); };
  try {
    std::rethrow_exception(e);
  } catch (const checkpoint::CheckpointError& x) {
    return {{"kind", "checkpoint"}, {"tag", x.tag()}, {"message", body(x)}};
  } catch (const UserError& x) {
    return {{"kind", "user"}, {"tag", x.tag()}, {"message", body(x)}};
  } catch (const Error& x) {
    return {{"kind", "error"}, {"tag", x.tag()}, {"message", body(x)}};
  } catch (const std::exception& x) {
    return {{"kind", "error"}, {"tag", "engine"}, {"message", x.what()}};
  } catch (...) {
    return {{"kind", "error"}, {"tag", "engine"}, {"message", "unknown exception"}};
  }
}

[[noreturn]] void rethrow_remote(const json& d, int from_rank) {
  const std::string kind = d.at("kind"), tag = d.at("tag");
  const std::string msg =
      fmt::format("(rank {}) {}", from_rank, d.at("message").get<std::string>());
  if (kind == "checkpoint") throw checkpoint::CheckpointError("", "", msg);
  if (kind == "user") throw UserError(tag, msg);
  throw Error(tag, msg);
}

}  // namespace

void broadcast_string(const Group& g, std::string& s, int root) {
  std::int64_t n = static_cast<std::int64_t>(s.size());
  g.broadcast(span(&n, 1), root).wait();
  s.resize(static_cast<std::size_t>(n));
  if (n > 0) g.broadcast(span(reinterpret_cast<std::uint8_t*>(s.data()), s.size()), root).wait();
}

void agree_or_throw(const Group& g, std::exception_ptr mine) {
  // max over (size - rank) of the failing ranks names the lowest failing rank.
  const std::int32_t v = g.all_reduce_value<std::int32_t>(mine ? g.size() - g.rank() : 0,
                                                          ReduceOp::max);
  if (v == 0) return;
  const int root = g.size() - v;
  // (replace: a message may quote bytes of a damaged file that are not UTF-8)
  std::string text = g.rank() == root
                         ? describe(mine).dump(-1, ' ', false, json::error_handler_t::replace)
                         : std::string();
  broadcast_string(g, text, root);
  if (g.rank() == root) std::rethrow_exception(mine);
  rethrow_remote(json::parse(text), root);
}

}  // namespace strata::parallel
