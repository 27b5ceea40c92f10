// escaped() and cut_list(): how messages quote what came from a file (issue 17, item 7).
#include <gtest/gtest.h>

#include "iron/error.hpp"
#include "iron/log.hpp"

namespace {

TEST(ErrorText, EscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(iron::escaped("plain name"), "plain name");
  EXPECT_EQ(iron::escaped("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // valid UTF-8 kept
  EXPECT_EQ(iron::escaped("a\x1b[31mred\n\t\\"), "a\\x1b[31mred\\n\\t\\\\");
  EXPECT_EQ(iron::escaped("\xff\xc3(\xed\xa0\x80"), "\\xff\\xc3(\\xed\\xa0\\x80");  // bad, truncated, surrogate
  EXPECT_EQ(iron::escaped("\xc2\x9b"), "\\xc2\\x9b");  // a C1 control (CSI) is escaped too
  // A cut says how long the text was (a 5 KB name once made a 5 KB message).
  EXPECT_EQ(iron::escaped(std::string(300, 'x')), std::string(200, 'x') + "... (300 bytes)");
  EXPECT_EQ(iron::escaped("\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xc3\xa9... (6 bytes)");  // cut by characters
}

TEST(ErrorText, LongPathsKeepTheirStartAndTheFileName) {
  EXPECT_EQ(iron::escaped_path("/models/a.gguf"), "/models/a.gguf");
  std::string path = "/tmp";
  for (int i = 0; i < 20; ++i) path += "/" + std::string(250, 'd');
  path += "/model.gguf";
  const std::string shown = iron::escaped_path(path);
  EXPECT_LE(shown.size(), 230u) << shown;
  EXPECT_EQ(shown.substr(0, 8), "/tmp/ddd") << shown;
  EXPECT_NE(shown.find("ddd...ddd"), std::string::npos) << shown;
  EXPECT_NE(shown.find("dd/model.gguf (" + std::to_string(path.size() / 1000) + ","), std::string::npos) << shown;
  EXPECT_EQ(shown.substr(shown.size() - 7), " bytes)") << shown;
  // Cut between characters, escaped on both sides of the cut.
  std::string odd = "/\xff" + std::string(300, 'x') + "\xc3\xa9\x1b.gguf";
  const std::string cut = iron::escaped_path(odd, 20);
  EXPECT_EQ(cut, "/\\xffxxxx...xxxxxxx\xc3\xa9\\x1b.gguf (310 bytes)");
}

TEST(ErrorText, CutListsNameTheRest) {
  std::vector<std::string> items;
  for (int i = 0; i < 4110; ++i) items.push_back(std::string(1, 't').append(std::to_string(i)));
  std::string logged;
  iron::set_log_sink([&](iron::LogLevel, std::string_view m) { logged = m; });
  const iron::LogLevel level = iron::log_level();
  iron::set_log_level(iron::LogLevel::debug);
  const std::string cut = iron::cut_list(items, "missing");
  iron::set_log_level(level);
  iron::set_log_sink(nullptr);
  EXPECT_EQ(cut.substr(0, 8), "t0, t1, ");
  EXPECT_NE(cut.find("t19, ... and 4,090 more"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("t20"), std::string::npos);
  EXPECT_NE(logged.find("t4109"), std::string::npos);  // IRON_LOG=debug shows the whole list
  EXPECT_EQ(iron::cut_list({"a", "b"}, "missing"), "a, b");
}

}  // namespace
