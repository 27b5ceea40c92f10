// `iron serve`'s request parser, without a model (the server itself is tested with real clients
// by tests/serve/serve_test.py; its stop strings are the engine's, tests/models/engine_test.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/request.hpp"

namespace {

using iron::serve::ApiError;
using iron::serve::Endpoint;
using iron::serve::parse_request;

int status_of(std::string_view body, Endpoint e = Endpoint::completion) {
  try {
    parse_request(body, e);
    return 200;
  } catch (const ApiError& err) {
    EXPECT_FALSE(nlohmann::json::parse(err.json(), nullptr, false).is_discarded());
    return err.status();
  }
}

TEST(ServeRequest, ReadsOpenAIsFieldsAndRefusesBadOnes) {
  auto r = parse_request(
      R"({"model":"x","messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":7,"seed":-1,"stop":["x","yz"],"stream":true,
          "stream_options":{"include_usage":true},"logit_bias":{}})",
      Endpoint::chat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.sampling.seed, ~uint64_t(0));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.ignored, std::vector<std::string>{"logit_bias"});
  auto c = parse_request(R"({"prompt":"hi","seed":18446744073709551615})", Endpoint::completion);
  EXPECT_EQ(c.prompt, "hi");
  EXPECT_EQ(c.sampling.seed, ~uint64_t(0));
  EXPECT_FALSE(c.max_tokens);

  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of("[]"), 400);
  EXPECT_EQ(status_of(R"({"max_tokens":4})"), 400);  // no prompt
  EXPECT_EQ(status_of(R"({"prompt":"a","max_tokens":0})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","max_tokens":-3})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","max_tokens":"4"})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","max_tokens":1e300})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","seed":9223372036854775808.0})"), 400);  // 2^63 as a double
  EXPECT_EQ(status_of(R"({"prompt":"a","seed":-9223372036854775808.0})"), 200);
  EXPECT_EQ(status_of(std::string(200000, '[') + std::string(200000, ']')), 400);  // deep, not a crash
  EXPECT_EQ(status_of(R"({"prompt":"a","temperature":3})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","top_p":1.5})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","stop":["a","b","c","d","e"]})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","stop":[""]})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","stream":"yes"})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a","n":2})"), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a"})"), 200);
  EXPECT_EQ(status_of(R"({"messages":[]})", Endpoint::chat), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"tool","content":"x"}]})", Endpoint::chat), 400);
  EXPECT_EQ(status_of(R"({"messages":[{"role":"user"}]})", Endpoint::chat), 400);
  EXPECT_EQ(status_of(R"({"prompt":"a"})", Endpoint::chat), 400);  // a chat takes messages
}

// POST /v1/embeddings: texts, one or many, OpenAI's dimensions and our prompt_name; token arrays,
// nothing, too many, a bad format or bad sizes refused with a 400 naming the field.
TEST(ServeRequest, ReadsEmbeddingRequests) {
  using iron::serve::parse_embedding_request;
  auto one = parse_embedding_request(R"({"model":"m","input":"hello","user":"u"})");
  EXPECT_EQ(one.inputs, std::vector<std::string>{"hello"});
  EXPECT_FALSE(one.base64);
  EXPECT_EQ(one.ignored, std::vector<std::string>{"user"});
  auto many = parse_embedding_request(R"({"input":["a","",  "c"],"encoding_format":"base64"})");
  EXPECT_EQ(many.inputs, (std::vector<std::string>{"a", "", "c"}));
  EXPECT_TRUE(many.base64);
  EXPECT_EQ(many.dimensions, 0);
  EXPECT_FALSE(many.prompt_name);
  // Matryoshka sizes and the model's prompts (the server checks both against its model).
  auto cut = parse_embedding_request(R"({"input":"a","dimensions":256,"prompt_name":"query"})");
  EXPECT_EQ(cut.dimensions, 256);
  EXPECT_EQ(cut.prompt_name, "query");
  EXPECT_FALSE(parse_embedding_request(R"({"input":"a","dimensions":null,"prompt_name":null})").prompt_name);
  auto refused = [](const std::string& body) {
    try {
      parse_embedding_request(body);
      return std::string("taken");
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.param();
    }
  };
  EXPECT_EQ(refused(R"({"model":"m"})"), "input");
  EXPECT_EQ(refused(R"({"input":[]})"), "input");
  EXPECT_EQ(refused(R"({"input":[1,2,3]})"), "input");
  EXPECT_EQ(refused(R"({"input":[[1,2]]})"), "input");
  EXPECT_EQ(refused(R"({"input":5})"), "input");
  EXPECT_EQ(refused(R"({"input":["a",5]})"), "input");
  EXPECT_EQ(refused(R"({"input":"a","encoding_format":"int8"})"), "encoding_format");
  EXPECT_EQ(refused(R"({"input":"a","dimensions":0})"), "dimensions");
  EXPECT_EQ(refused(R"({"input":"a","dimensions":"64"})"), "dimensions");
  EXPECT_EQ(refused(R"({"input":"a","dimensions":2.5})"), "dimensions");
  EXPECT_EQ(refused(R"({"input":"a","prompt_name":3})"), "prompt_name");
  EXPECT_EQ(refused("not json"), "");
  std::string big = R"({"input":[)";
  for (int i = 0; i < 2049; ++i) big += std::string(i ? "," : "") + "\"x\"";
  EXPECT_EQ(refused(big + "]}"), "input");
}

}  // namespace
