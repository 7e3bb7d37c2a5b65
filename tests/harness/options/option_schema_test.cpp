// The option schema: every command's options declared with a help text and a default; a
// sweep's config block read back through CLI11's config support into the same options; flags
// over the file; errors naming the option as the user gave it; the command line `profile`
// writes for the sweep parsing back to the same options.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/cli/option_app.h"
#include "harness/sweep/sweep.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;
using Source = OptionSources::Source;

std::string write_config(const std::string& name, const std::string& text) {
  const std::string path =
      testing::TempDir() + "/options_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

// `scalescope sweep ARGS` (with --config FILE when given), as the sweep command parses it.
struct Parsed {
  SweepOptions options;
  OptionSources sources;
};
Parsed parse_sweep(std::vector<std::string> args, const nlohmann::json* config = nullptr) {
  Parsed p;
  OptionList list;
  add_sweep_options(list, p.options);
  p.sources = cli::parse_with_config(list, args, config, "report.json (its config)");
  return p;
}

// Every command, as main registers them.
void add_commands(CLI::App& app, cli::Action& action) {
  cli::add_train_command(app, action);
  cli::add_sweep_command(app, action);
  cli::add_report_command(app, action);
  cli::add_profile_command(app, action);
  cli::add_models_command(app, action);
  cli::add_pipeline_bench_command(app, action);
  cli::add_collectives_command(app, action);
  cli::add_compare_command(app, action);
  cli::add_export_command(app, action);
  cli::add_devices_command(app, action);
  cli::add_analyze_command(app, action);
}

// No command declares an option of its own beside the schema (CLI11's --help and --config
// apart, which CLI11 adds).
TEST(OptionSchema, EveryOptionOfEveryCommandIsDeclaredInTheSchema) {
  CLI::App app;
  cli::Action action;
  add_commands(app, action);
  for (CLI::App* command : app.get_subcommands({})) {
    for (CLI::Option* option : command->get_options()) {
      if (option == command->get_help_ptr() || option == command->get_config_ptr()) continue;
      EXPECT_TRUE(cli::declared_in_schema(*option))
          << command->get_name() << " " << option->get_name() << " is not declared in the schema";
    }
  }
}

TEST(OptionSchema, EveryOptionOfEveryCommandHasAHelpTextAndItsDefaultInHelp) {
  CLI::App app;
  cli::Action action;
  add_commands(app, action);
  for (const CLI::App* command : app.get_subcommands({})) {
    const std::string help = command->help();
    for (const CLI::Option* option : command->get_options()) {
      const std::string name = command->get_name() + " " + option->get_name();
      EXPECT_FALSE(option->get_description().empty()) << name;
      EXPECT_NE(help.find(option->get_name(false, true)), std::string::npos) << name;
      if (option->get_expected_min() > 0 && !option->get_default_str().empty()) {
        EXPECT_NE(help.find("=" + option->get_default_str()), std::string::npos) << name;
      }
    }
  }
  // Each declaration has a help text, and a config key with '_' for '-'.
  SweepOptions o;
  OptionList list;
  add_sweep_options(list, o);
  for (const OptionDecl& d : list.decls()) {
    EXPECT_FALSE(d.help.empty()) << d.key;
    EXPECT_EQ(d.key.find('-'), std::string::npos) << d.key;
  }
}

// Options with a value of every kind away from its default.
SweepOptions unusual() {
  SweepOptions o;
  o.models = {"dense-100", "cnn:width=1", "cnn:width=2"};
  o.devices = "cpu:1,2";
  o.global_batches = {16, 32};
  o.threads = 1;
  o.oversubscribe = true;
  o.repeats = 5;
  o.steady.tolerance = 0.125;
  o.train.optimizer.kind = OptimizerKind::kSgd;
  o.train.optimizer.lr = 0.05f;
  o.train.lr_scaling = LrScaling::kSqrt;
  o.train.overlap = false;
  o.precisions = {"fp32", "bf16"};
  o.train.deterministic = false;
  o.train.seed = 7;
  o.train.data.workers = 2;
  o.train.data.flip = true;
  o.train.memory_limit_mb = 12.5;
  o.bucket_caps_mb = {0.5, 25};
  o.first_buckets_mb = {0.25};
  o.output = "unusual.json";
  return o;
}

TEST(OptionSchema, AReportsConfigBlockReadsBackIntoTheSameOptions) {
  const SweepOptions o = unusual();
  const nlohmann::json config = sweep_config_json(o);
  EXPECT_EQ(config.at("global_batch"), nlohmann::json({16, 32}));
  EXPECT_FALSE(config.contains("batch"));  // one scaling mode
  const SweepOptions weak;
  EXPECT_FALSE(sweep_config_json(weak).contains("global_batch"));
  EXPECT_FALSE(config.contains("trace"));  // command line only
  const std::string path = write_config("roundtrip.json", config.dump());
  const Parsed p = parse_sweep({"--config", path});
  EXPECT_EQ(sweep_config_json(p.options), config);
  EXPECT_EQ(p.options.models, o.models);
  EXPECT_EQ(p.options.mode(), ScalingMode::kStrong);
  EXPECT_FALSE(p.options.train.overlap);
  EXPECT_EQ(p.options.train.deterministic, false);
  EXPECT_EQ(config.at("deterministic"), false);  // the key, not the flag's name
  EXPECT_EQ(p.options.train.lr_scaling, LrScaling::kSqrt);
  EXPECT_EQ(p.options.bucket_caps_mb, (std::vector<double>{0.5, 25}));
  EXPECT_EQ(config.at("precision"), nlohmann::json({"fp32", "bf16"}));
  EXPECT_EQ(p.options.precisions, o.precisions);
  EXPECT_EQ(config.at("first_bucket_mb"), nlohmann::json({0.25}));
  EXPECT_EQ(p.sources.of("repeats"), Source::kFile);
  // The same block given as a stream (--resume's path) reads back alike.
  EXPECT_EQ(sweep_config_json(parse_sweep({}, &config).options), config);
  std::remove(path.c_str());
}

TEST(OptionSchema, FlagsGivenOverrideTheFile) {
  const std::string path = write_config(
      "override.json", R"({"repeats": 5, "steps": 7, "global_batch": [16], "overlap": false})");
  const Parsed p = parse_sweep({"--config", path, "--repeats", "2", "--batch", "8"});
  EXPECT_EQ(p.options.repeats, 2);
  EXPECT_EQ(p.options.steps, 7);
  EXPECT_FALSE(p.options.train.overlap);
  // --batch on the command line replaces the file's strong-scaling axis.
  EXPECT_EQ(p.options.mode(), ScalingMode::kWeak);
  EXPECT_EQ(p.options.batches, (std::vector<int64_t>{8}));
  EXPECT_EQ(p.sources.of("repeats"), Source::kCommandLine);
  EXPECT_EQ(p.sources.of("steps"), Source::kFile);
  EXPECT_EQ(p.sources.of("seed"), Source::kDefault);
  // And over --resume's config block.
  const nlohmann::json config = sweep_config_json(unusual());
  const Parsed resumed = parse_sweep({"--repeats", "2"}, &config);
  EXPECT_EQ(resumed.options.repeats, 2);
  EXPECT_EQ(resumed.options.train.seed, 7u);
  std::remove(path.c_str());
}

// Determinism has three states: preferred (neither flag; no key in a config), required
// (--deterministic; true) and off (--no-deterministic; false), each of which a report's config
// block and a written command line carry back.
TEST(OptionSchema, DeterminismIsPreferredUnlessAFlagOrTheFileSaysOtherwise) {
  const auto determinism = [](const std::vector<std::string>& args) {
    return determinism_of(parse_sweep(args).options.train);
  };
  EXPECT_EQ(determinism({}), Determinism::kPreferred);
  EXPECT_EQ(determinism({"--deterministic"}), Determinism::kRequired);
  EXPECT_EQ(determinism({"--no-deterministic"}), Determinism::kOff);
  EXPECT_EQ(determinism({"--deterministic", "--no-deterministic"}), Determinism::kOff);  // last
  EXPECT_EQ(determinism({"--no-deterministic", "--deterministic"}), Determinism::kRequired);
  EXPECT_EQ(determinism({"--no-deterministic=no"}), Determinism::kRequired);
  // CLI11 inverts a negated flag's value before any check: "2x" was a count of -2 (off).
  EXPECT_CONTAINS(error_of([] { parse_sweep({"--no-deterministic=2x"}); }),
                  "--no-deterministic: '2x' is neither yes nor no");
  EXPECT_CONTAINS(error_of([] { parse_sweep({"--no-overlap=3x"}); }),
                  "--no-overlap: '3x' is neither yes nor no");
  EXPECT_FALSE(parse_sweep({"--no-overlap=yes"}).options.train.overlap);
  EXPECT_TRUE(parse_sweep({"--no-overlap=0"}).options.train.overlap);

  const auto from_file = [](const char* text, std::vector<std::string> args = {}) {
    const std::string path = write_config("determinism.json", text);
    args.insert(args.begin(), {"--config", path});
    const Parsed p = parse_sweep(args);
    std::remove(path.c_str());
    return determinism_of(p.options.train);
  };
  EXPECT_EQ(from_file("{}"), Determinism::kPreferred);
  EXPECT_EQ(from_file(R"({"deterministic": true})"), Determinism::kRequired);
  EXPECT_EQ(from_file(R"({"deterministic": false})"), Determinism::kOff);
  EXPECT_EQ(from_file(R"({"deterministic": true})", {"--no-deterministic"}), Determinism::kOff);

  for (const std::optional<bool> asked :
       {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    SweepOptions o;
    o.train.deterministic = asked;
    const nlohmann::json config = sweep_config_json(o);
    EXPECT_EQ(config.contains("deterministic"), asked.has_value());
    EXPECT_EQ(parse_sweep({}, &config).options.train.deterministic, asked);
    // The command line another command is given (profile's sweep) parses back alike.
    OptionList list;
    add_sweep_options(list, o);
    SweepOptions defaults;
    OptionList default_list;
    add_sweep_options(default_list, defaults);
    const std::vector<std::string> argv = options_argv(list, default_list);
    EXPECT_EQ(parse_sweep(argv).options.train.deterministic, asked) << fmt::format("{}", argv);
  }
}

// --conv-search: heuristic by default, benchmark on request, from the flag or a config's key,
// and written back into a report's config; any other name is refused naming both.
TEST(OptionSchema, ConvolutionSearchIsHeuristicUnlessAskedAndTravelsInTheConfig) {
  EXPECT_EQ(parse_sweep({}).options.train.conv_search, ConvSearch::kHeuristic);
  EXPECT_EQ(parse_sweep({"--conv-search", "benchmark"}).options.train.conv_search,
            ConvSearch::kBenchmark);
  EXPECT_CONTAINS(error_of([] { parse_sweep({"--conv-search", "timed"}); }), "heuristic");
  SweepOptions o;
  o.train.conv_search = ConvSearch::kBenchmark;
  const nlohmann::json config = sweep_config_json(o);
  EXPECT_EQ(config.at("conv_search"), "benchmark");
  EXPECT_EQ(parse_sweep({}, &config).options.train.conv_search, ConvSearch::kBenchmark);
  const std::string path = write_config("conv-search.json", R"({"conv_search": "heuristic"})");
  EXPECT_EQ(parse_sweep({"--config", path, "--conv-search", "benchmark"}).options.train.conv_search,
            ConvSearch::kBenchmark);
  EXPECT_EQ(parse_sweep({"--config", path}).options.train.conv_search, ConvSearch::kHeuristic);
  std::remove(path.c_str());
}

TEST(OptionSchema, TheLearningRateDefaultsToTheOptimizers) {
  EXPECT_FLOAT_EQ(parse_sweep({}).options.train.optimizer.lr, 1e-3f);
  EXPECT_FLOAT_EQ(parse_sweep({"--optimizer", "sgd"}).options.train.optimizer.lr, 0.01f);
  EXPECT_FLOAT_EQ(parse_sweep({"--optimizer", "sgd", "--lr", "0.2"}).options.train.optimizer.lr,
                  0.2f);
  const std::string path = write_config("sgd.json", R"({"optimizer": "sgd"})");
  EXPECT_FLOAT_EQ(parse_sweep({"--config", path}).options.train.optimizer.lr, 0.01f);
  std::remove(path.c_str());
}

TEST(OptionSchema, AFilesValuesAreReadAsTheFlagsWould) {
  const std::string path =
      write_config("lists.json", R"({"devices": [1, 2], "models": "cnn:width=1,2", "batch": 8,
                                     "bucket_cap_mb": 5})");
  const Parsed p = parse_sweep({"--config", path});
  EXPECT_EQ(p.options.devices, "1,2");
  // A number where a list may be (reports before bucket caps were an axis wrote one).
  EXPECT_EQ(p.options.bucket_caps_mb, (std::vector<double>{5}));
  EXPECT_EQ(parse_sweep({"--bucket-cap-mb", "1,5,25.5"}).options.bucket_caps_mb,
            (std::vector<double>{1, 5, 25.5}));
  EXPECT_EQ(p.options.models, (std::vector<std::string>{"cnn:width=1", "cnn:width=2"}));
  EXPECT_EQ(p.options.batches, (std::vector<int64_t>{8}));
  std::remove(path.c_str());
}

TEST(OptionSchema, BadValuesAreRefusedNamingTheOptionAsGiven) {
  const auto file_error = [](const char* text) {
    const std::string path = write_config("bad.json", text);
    const std::string message = error_of([&] { parse_sweep({"--config", path}); });
    std::remove(path.c_str());
    return message;
  };
  EXPECT_CONTAINS(file_error(R"({"repeat": 3})"), "unknown key 'repeat' (did you mean repeats?)");
  EXPECT_CONTAINS(file_error(R"({"optimizer": "adma"})"),
                  "'optimizer' is 'adma', not one of sgd, adam (did you mean adam?)");
  EXPECT_CONTAINS(file_error(R"({"repeats": "3"})"), "'repeats' must be an integer");
  EXPECT_CONTAINS(file_error(R"({"repeats": 0})"), "bad.json: 'repeats': 0 must be from 1 to 1000");
  EXPECT_CONTAINS(file_error(R"({"batch": [8, 0]})"), "'batch': 0 must be a positive number");
  EXPECT_CONTAINS(file_error(R"({"optimizer": "lamb"})"), "'optimizer' is 'lamb'");
  EXPECT_CONTAINS(file_error(R"({"batch": [8], "global_batch": [8]})"), "not both");
  EXPECT_CONTAINS(file_error(R"({"overlap": 1})"), "'overlap' must be true or false");
  EXPECT_CONTAINS(file_error(R"({"deterministic": "yes"})"),
                  "'deterministic' must be true or false");
  EXPECT_CONTAINS(file_error(R"({"models": []})"), "'models' is empty");
  EXPECT_CONTAINS(file_error(R"({"bucket_cap_mb": [25, 0]})"),
                  "'bucket_cap_mb': 0 must be a positive size");
  EXPECT_CONTAINS(file_error(R"({"bucket_cap_mb": ["big"]})"), "bucket_cap_mb");
  // A size whose bytes an int64_t cannot hold was read as 1 byte: buckets of one tensor each.
  EXPECT_CONTAINS(file_error(R"({"bucket_cap_mb": [25, 1e300]})"),
                  "must be a positive size of at most 2^40 MiB (1 EiB)");
  EXPECT_CONTAINS(file_error(R"({"first_bucket_mb": []})"), "'first_bucket_mb' is empty");
  EXPECT_CONTAINS(file_error(R"([1, 2])"), "must be an object");
  EXPECT_CONTAINS(file_error("{"), "is not valid JSON");
  // Read until memory ran out.
  EXPECT_CONTAINS(error_of([] {
                    parse_sweep({"--config", "/dev/zero"});
                  }),
                  "config file /dev/zero: over 16 MiB, which is no config file");
  // Found by tests/fuzz (sweep_config): nlohmann's out_of_range for a number beyond double,
  // and an integer beyond int64 that was read wrapped.
  EXPECT_CONTAINS(file_error(R"({"repeats": 1e999})"), "is not valid JSON");
  EXPECT_CONTAINS(file_error(R"({"seed": 18446744073709551615})"), "'seed' is out of range");
  // The command line's spelling, and the library's own when nothing says how it was given.
  EXPECT_CONTAINS(error_of([] {
                    parse_sweep({"--repeats", "0"});
                  }),
                  "--repeats 0 must be from 1 to 1000");
  EXPECT_CONTAINS(error_of([] {
                    parse_sweep({"--models", "dense-100,,mlp"});
                  }),
                  "--models dense-100,,mlp: an empty model name");
  SweepOptions o;
  o.repeats = 0;
  EXPECT_CONTAINS(error_of([&] { validate(o); }), "repeats 0 must be from 1 to 1000");
  EXPECT_CONTAINS(error_of([] { parse_sweep({"--repeats"}); }), "--repeats");  // usage
}

// CLI11 2.1 dropped the empty items of a list it split at commas: `--batch 32,,64` swept 32 and
// 64 as if the typo were not there, and `--batch ,` took the next flag for its value.
TEST(OptionSchema, AnEmptyItemInAListIsRefusedNotDropped) {
  const char* const lists[][2] = {{"--batch", "32,,64"},
                                  {"--batch", "32,"},
                                  {"--batch", ","},
                                  {"--bucket-cap-mb", ",5"},
                                  {"--precision", "fp32,,bf16"},
                                  {"--global-batch", "64,,"}};
  for (const auto& list : lists) {
    const std::string flag = list[0], value = list[1];
    EXPECT_CONTAINS(error_of([&] {
                      parse_sweep({flag, value, "--steps", "4"});
                    }),
                    fmt::format("{} {}: an empty item", flag, value));
  }
  // The ways a list may be given.
  EXPECT_EQ(parse_sweep({"--batch", "8,16"}).options.batches, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(parse_sweep({"--batch=8,16"}).options.batches, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(parse_sweep({"--batch", "8", "16,32"}).options.batches,
            (std::vector<int64_t>{8, 16, 32}));
  EXPECT_EQ(parse_sweep({"--batch", "8", "--batch", "16"}).options.batches,
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(parse_sweep({"--bucket-cap-mb", "1,2.5"}).options.bucket_caps_mb,
            (std::vector<double>{1, 2.5}));
  EXPECT_CONTAINS(error_of([] { parse_sweep({"--batch", "8,x"}); }), "--batch");
  EXPECT_CONTAINS(error_of([] {
                    parse_sweep({"--batch", "8,99999999999999999999"});
                  }),
                  "is not a whole number");
}

// `collectives --json DIR/x` measured for minutes, then lost it all to the write at the end.
TEST(OptionSchema, AnOutputThatCannotBeWrittenIsRefusedWhenTheOptionsSettle) {
  std::string output;
  OptionList list;
  list.add("-o,--output", output, "results", writable_file(/*dash_is_stdout=*/true));
  EXPECT_CONTAINS(error_of([&] {
                    cli::parse_with_config(list, {"-o", "/nonexistent/r.json"});
                  }),
                  "--output /nonexistent/r.json: cannot write '/nonexistent/r.json': cannot create "
                  "files in directory '/nonexistent': No such file or directory");
  EXPECT_CONTAINS(error_of([&] {
                    cli::parse_with_config(list, {"-o", "/dev/null"});
                  }),
                  "--output /dev/null: cannot write '/dev/null': it is a character device");
  EXPECT_EQ(error_of([&] { cli::parse_with_config(list, {"-o", "-"}); }), "<no error thrown>");
  EXPECT_EQ(error_of([&] { cli::parse_with_config(list, {}); }), "<no error thrown>");
}

TEST(OptionSchema, ProfilesSweepArgumentsParseBackToTheSameOptions) {
  SweepOptions point;  // as `scalescope profile` builds it: one value on each axis
  point.models = {"dense-100"};
  point.devices = "cpu:2";
  point.batches = {8};
  point.repeats = point.threads = 1;
  point.steps = 6;
  point.profile_steps = "2:4";
  point.output = "point.json";
  point.train.overlap = false;
  point.train.optimizer.kind = OptimizerKind::kSgd;
  point.train.optimizer.lr = 0.01f;
  const std::vector<std::string> args = sweep_arguments(point);
  EXPECT_EQ(args,
            (std::vector<std::string>{"--models",     "dense-100", "--devices",  "cpu:2",
                                      "--batch",      "8",         "--threads",  "1",
                                      "--repeats",    "1",         "--steps",    "6",
                                      "--optimizer",  "sgd",       "--lr",       "0.01",
                                      "--no-overlap", "--output",  "point.json", "--profile-steps",
                                      "2:4"}));
  const Parsed p = parse_sweep(args);
  EXPECT_EQ(sweep_arguments(p.options), args);
  EXPECT_EQ(sweep_config_json(p.options), sweep_config_json(point));
  EXPECT_EQ(p.options.profile_steps, "2:4");
  // Every option away from its default comes back too.
  const SweepOptions all = unusual();
  EXPECT_EQ(sweep_config_json(parse_sweep(sweep_arguments(all)).options), sweep_config_json(all));
}

TEST(OptionSchema, SizesInMiBBecomeTheirBytesUpToTheLargestAccepted) {
  EXPECT_EQ(mib_to_bytes(25.0), 25 * (int64_t{1} << 20));
  EXPECT_EQ(mib_to_bytes(1e-9), 1);  // a positive size is at least a byte
  EXPECT_EQ(mib_to_bytes(kMaxMiB), int64_t{1} << 60);
  const OptionCheck<double> check = mib_size(true, "must be a size");
  EXPECT_EQ(check(0.0), "");
  EXPECT_EQ(check(kMaxMiB), "");
  EXPECT_EQ(check(kMaxMiB * 2), "must be a size of at most 2^40 MiB (1 EiB)");
  EXPECT_NE(check(-1.0), "");
  EXPECT_NE(mib_size(false, "must be a size")(0.0), "");
}

}  // namespace
}  // namespace scalescope
