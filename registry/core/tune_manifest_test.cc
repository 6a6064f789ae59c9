#include "tune_manifest.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kreg {
namespace {

// A manifest's root table, read as the manifest parser reads it: through the guard.
toml::table root_of(const std::string& text) {
  toml::table root;
  const std::optional<TomlProblem> problem = parse_toml_guarded(text, "kernel.toml", &root);
  if (problem) ADD_FAILURE() << "bad TOML in the test: " << problem->message;
  return root;
}

ConfigSpace space_of(const std::string& tune) { return parse_tune_table(root_of("[tune]\n" + tune)); }

// The field and message of a TomlFieldError.
using FieldError = std::pair<std::string, std::string>;

// The field and message of the error reading `tune` raises.
FieldError error_of(const std::string& tune) {
  try {
    space_of(tune);
  } catch (const TomlFieldError& e) {
    return {e.field(), e.what()};
  }
  return {"(no error)", ""};
}

TEST(TuneTableTest, ParamsSortedDefaultFirstValueOrGiven) {
  const ConfigSpace space =
      space_of("params = { THREADS = [256, 128, 512], ROWS = [1, 2, 4] }\ndefault = { ROWS = 2 }\n");
  ASSERT_EQ(space.params.size(), 2u);
  EXPECT_EQ(space.params[0].name, "ROWS");
  EXPECT_EQ(space.params[0].default_value, 2);
  EXPECT_EQ(space.params[1].name, "THREADS");
  EXPECT_EQ(space.params[1].values, (std::vector<int64_t>{256, 128, 512}));
  EXPECT_EQ(space.params[1].default_value, 256);
  EXPECT_EQ(config_label(space.default_config()), "ROWS=2,THREADS=256");
  EXPECT_TRUE(space.rule.empty());
}

TEST(TuneTableTest, NoTuneTableIsAnEmptySpace) {
  EXPECT_TRUE(parse_tune_table(root_of("format = 1\n")).empty());
}

TEST(TuneTableTest, RuleFiltersConfigsDefaultFirst) {
  const ConfigSpace space =
      space_of("params = { T = [256, 128, 512], R = [1, 2, 4] }\nrule = \"R * T <= 512 && !(R == 2 && T == 128)\"\n");
  std::vector<std::string> labels;
  for (const Config& c : space.enumerate()) labels.push_back(config_label(c));
  // Default (R=1, T=256) first, then odometer order over the written values.
  EXPECT_EQ(labels, (std::vector<std::string>{"R=1,T=256", "R=1,T=128", "R=1,T=512", "R=2,T=256", "R=4,T=128"}));
}

TEST(TuneTableTest, RuleErrorsNameTheRuleAndTheProblem) {
  const std::string params = "params = { ROWS = [1, 2], THREADS = [128, 256] }\n";
  auto [field, what] = error_of(params + "rule = \"ROWS * THREDS <= 1024\"\n");
  EXPECT_EQ(field, "tune.rule");
  EXPECT_EQ(what, "rule \"ROWS * THREDS <= 1024\": unknown name 'THREDS'; the parameters are ROWS, THREADS at column 8");
  std::tie(field, what) = error_of(params + "rule = \"ROWS * (THREADS <= 1024\"\n");
  EXPECT_NE(what.find("missing ')'"), std::string::npos) << what;
  std::tie(field, what) = error_of(params + "rule = \"ROWS <= 2 &\"\n");
  EXPECT_NE(what.find("unexpected character '&' at column 11"), std::string::npos) << what;
  std::tie(field, what) = error_of(params + "rule = \"ROWS <=\"\n");
  EXPECT_NE(what.find("the rule ends where a value is expected"), std::string::npos) << what;
  std::tie(field, what) = error_of(params + "rule = \"THREADS / (ROWS - 1) > 0\"\n");
  EXPECT_EQ(field, "tune.rule");
  EXPECT_EQ(what, "rule \"THREADS / (ROWS - 1) > 0\": division by zero in '/' (with ROWS=1,THREADS=128)");
  std::tie(field, what) = error_of(params + "rule = \"ROWS > 1\"\n");
  EXPECT_EQ(what, "rule \"ROWS > 1\" rejects the default config ROWS=1,THREADS=128; change tune.default or the rule");
  std::tie(field, what) = error_of(params + "rule = 1\n");
  EXPECT_EQ(field, "tune.rule");
  EXPECT_EQ(what, "expected a string, got an integer");
}

TEST(TuneTableTest, ParamErrors) {
  EXPECT_EQ(error_of("params = { rows = [1] }\n"),
            FieldError("tune.params.rows", "a parameter is a preprocessor define: use an upper-case C identifier "
                                           "([A-Z_][A-Z0-9_]*)"));
  EXPECT_EQ(error_of("params = { 1ROWS = [1] }\n").first, "tune.params.1ROWS");
  EXPECT_EQ(error_of("params = { _R1 = [1] }\n").first, "(no error)");
  EXPECT_EQ(error_of("params = { ROWS = [] }\n"),
            FieldError("tune.params.ROWS", "expected a non-empty array of integers, got an array"));
  EXPECT_EQ(error_of("params = { ROWS = [1, 1] }\n"), FieldError("tune.params.ROWS[1]", "the value 1 is listed twice"));
  EXPECT_EQ(error_of("params = { ROWS = [1, \"2\"] }\n"),
            FieldError("tune.params.ROWS[1]", "expected an integer, got a string"));
  EXPECT_EQ(error_of("params = {}\n"),
            FieldError("tune.params", "empty; name at least one parameter, or remove [tune]"));
  EXPECT_EQ(error_of("params = { ROWS = [1] }\ndefault = { ROWS = 3 }\n"),
            FieldError("tune.default.ROWS", "3 is not one of the values tune.params.ROWS lists"));
  EXPECT_EQ(error_of("params = { ROWS = [1] }\ndefault = { COLS = 1 }\n"),
            FieldError("tune.default.COLS", "not a parameter of tune.params"));
  EXPECT_EQ(error_of("rule = \"1\"\n"), FieldError("tune.params", "missing; add params = { NAME = [value, ...] }"));
  try {
    parse_tune_table(root_of("tune = 3\n"));
    ADD_FAILURE() << "tune = 3 is not a table";
  } catch (const TomlFieldError& e) {
    EXPECT_EQ(e.field(), "tune");
    EXPECT_STREQ(e.what(), "expected a table, got an integer");
  }
}

TEST(TuneTableTest, UnknownKeysAreSuggestedOrListed) {
  EXPECT_EQ(error_of("params = { ROWS = [1] }\nrules = \"1\"\n"),
            FieldError("tune.rules", "unknown key \"rules\" (did you mean \"rule\"?)"));
  EXPECT_EQ(error_of("params = { ROWS = [1] }\nzzzzzz = 1\n"),
            FieldError("tune.zzzzzz", "unknown key \"zzzzzz\"; expected one of params, default, rule"));
}

TEST(TuneTableTest, AnOpNamesTheParametersItReads) {
  const ConfigSpace space = space_of("params = { BLOCK = [1, 2], ROWS = [1, 4], UNROLL = [1, 8] }\n");
  EXPECT_EQ(parse_op_tune(root_of("tune = [\"ROWS\", \"BLOCK\"]\n"), "op[0]", space),
            (std::vector<std::string>{"BLOCK", "ROWS"}));  // the space's order
  EXPECT_TRUE(parse_op_tune(root_of("tune = []\n"), "op[0]", space).empty());
  EXPECT_EQ(parse_op_tune(root_of(""), "op[0]", space),
            (std::vector<std::string>{"BLOCK", "ROWS", "UNROLL"}));  // all by default
  EXPECT_TRUE(parse_op_tune(root_of(""), "op[0]", ConfigSpace()).empty());  // no [tune]
}

TEST(TuneTableTest, AnOpsTuneErrors) {
  const ConfigSpace space = space_of("params = { ROWS = [1, 2] }\n");
  auto error = [](const std::string& op, const ConfigSpace& s) {
    try {
      parse_op_tune(root_of(op), "op[3]", s);
    } catch (const TomlFieldError& e) {
      return FieldError(e.field(), e.what());
    }
    return FieldError("(no error)", "");
  };
  EXPECT_EQ(error("tune = [\"COLS\"]\n", space),
            FieldError("op[3].tune[0]", "\"COLS\" is not a parameter of [tune]; its parameters: ROWS"));
  EXPECT_EQ(error("tune = [\"ROWS\", \"ROWS\"]\n", space), FieldError("op[3].tune[1]", "\"ROWS\" is listed twice"));
  EXPECT_EQ(error("tune = \"ROWS\"\n", space), FieldError("op[3].tune", "expected an array of strings, got a string"));
  EXPECT_EQ(error("tune = [1]\n", space), FieldError("op[3].tune[0]", "expected a string, got an integer"));
  EXPECT_EQ(error("tune = [\"ROWS\"]\n", ConfigSpace()),
            FieldError("op[3].tune", "names parameters of the kernel's [tune] table, and there is none; add [tune] "
                                     "with params = { NAME = [value, ...] }, or remove this key"));
}

}  // namespace
}  // namespace kreg
