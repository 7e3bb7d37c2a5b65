// Values the user gives that cannot be taken as given: named, never read as something else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

#include "core/log.h"

#include "tests/harness/cli/run_cli.h"

namespace {

using scalescope::testing_util::contains;
using scalescope::testing_util::run_cli;

// A command line the CLI refuses, and words its message must hold.
struct Case {
  const char* args;
  const char* message;
};

// Each case refused (status not 0) with its message, and none of `never` in any message.
void expect_refused(std::span<const Case> cases, std::initializer_list<const char*> never) {
  for (const Case& c : cases) {
    const scalescope::testing_util::CliResult r = run_cli(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << " gave: " << r.output;
    for (const char* words : never) {
      EXPECT_FALSE(contains(r.output, words)) << c.args << " gave: " << r.output;
    }
  }
}

TEST(CliValues, AnUnknownWordIsNamedWithTheOneMostLikelyMeant) {
  // CLI11 2.1 said "The following arguments were not expected: cpu:1 --devicse", the option
  // after its value, and suggested nothing.
  const Case cases[] = {
      {"trian", "unknown command 'trian' (did you mean train?)"},
      {"train --devicse cpu:1", "train: unknown option '--devicse' (did you mean --devices?)\n"},
      {"sweep --devices=cpu:1 --bach=8 --zzz 3",
       "sweep: unknown options '--bach' (did you mean --batch?), '--zzz'; scalescope sweep "
       "--help lists its options"},
      {"train -x", "train: unknown option '-x'; scalescope train --help lists its options"},
      {"train --=x", "train: unknown option '--=x';"},
      {"train --lr -1", "--lr -1 must be 0 or a positive number"},  // a value, not an option
      {"compare a.json b.json c.json", "compare: unexpected argument 'c.json'"},
      {"train one two", "train: unexpected arguments 'one' 'two'"},  // in their order
      {"train -- --steps", "train: unexpected argument '--steps'"},  // after --, a word
      {"models resnt", "unknown model 'resnt' (did you mean resnet?)"},
      {"models gpt:layer=2", "no parameter 'layer' (did you mean layers?)"},
      {"train --optimizer adm",
       "scalescope: error: --optimizer: 'adm' is not one of sgd, adam (did you mean adam?)\n"},
      {"", "scalescope: error: a command is required (commands: train, sweep, "},
      {"--bogus",
       "scalescope: error: unknown option '--bogus'; scalescope --help lists its "
       "options\n"},
      {"--verison", "unknown option '--verison' (did you mean --version?)"},
      {"train --devices", "--devices: 1 required TEXT missing (see scalescope train --help)"},
  };
  expect_refused(cases, {"not expected", "Run with --help"});
}

// A flag given a value takes CLI11's yes and no words; any other value is named, where
// --deterministic=x aborted the program (CLI11's std::stoll threw from its callback).
TEST(CliValues, AFlagsValueThatIsNoYesOrNoIsNamed) {
  const Case cases[] = {
      {"train --deterministic=fatch",
       "scalescope: error: --deterministic: 'fatch' is neither yes nor no (true, false, yes, no, "
       "on, off, 1, 0) (see scalescope train --help)\n"},
      {"train --no-deterministic=x", "--no-deterministic: 'x' is neither yes nor no"},
      // CLI11 inverted a negated flag's value before the check saw it: "2x" ran as yes.
      {"train --no-fusion=2x", "--no-fusion: '2x' is neither yes nor no"},
      // The program's own flag had no check: "a command is required".
      {"--version=x",
       "scalescope: error: --version: 'x' is neither yes nor no (true, false, yes, no, on, off, 1, "
       "0) (see scalescope --help)\n"},
      {"sweep --steps 1 --no-overlap=maybe", "--no-overlap: 'maybe' is neither yes nor no"},
      {"train --deterministic=99999999999999999999", "'99999999999999999999' is neither yes"},
      {"train --flip=maybe", "--flip: 'maybe' is neither yes nor no"},
      {"train --flip=2x", "--flip: '2x' is neither yes nor no"},
      {"sweep --noise-scale=-", "--noise-scale: '-' is neither yes nor no"},
  };
  expect_refused(cases, {"terminate", "stoll", "Could not convert"});
  // CLI11's words for yes and no stay flags' values.
  const scalescope::testing_util::CliResult described =
      run_cli("models --layers=on --json=no mlp-41m");
  EXPECT_EQ(described.status, 0) << described.output;
  EXPECT_TRUE(contains(described.output, "Dense(4000)")) << described.output;  // --layers
  EXPECT_FALSE(contains(described.output, "{")) << described.output;           // not --json
}

// CLI11 2.1 said "--model: At Most 1 required but received 2". A list option given twice is
// one list (--batch 32 --batch 64 is --batch 32,64), a flag twice is the flag.
TEST(CliValues, AnOptionOfOneValueGivenTwiceIsNamedWithItsValues) {
  const Case cases[] = {
      {"train --model a --model b",
       "scalescope: error: --model was given 2 times ('a', 'b'); it takes one value (see "
       "scalescope train --help)\n"},
      {"sweep --repeats 2 --steps 3 --repeats=4 --repeats 5",
       "--repeats was given 3 times ('2', '4', '5'); it takes one value"},
      {"models --batch 8 --batch 16", "--batch was given 2 times ('8', '16')"},
  };
  expect_refused(cases, {"At Most"});
}

TEST(CliValues, NumbersPastWhatTheirOptionHoldsAreRefusedNamingIt) {
  // Each was read as another number before: CLI11 2.1 saturated the 64-bit integers (2^63 - 1
  // steps, a batch of 2^63 - 1) and wrapped a negative seed to 2^64 - 1; a size in MiB past
  // what an int64_t of bytes holds became one byte. A second bad flag makes a regression fail
  // at once instead of training for ever.
  const Case cases[] = {
      {"train --steps 99999999999999999999 --lr -1", "--steps: 99999999999999999999 is not"},
      {"sweep --batch 8,99999999999999999999 --repeats 0", "--batch: 99999999999999999999 is not"},
      {"train --seed -1 --lr -1", "--seed: -1 is not a whole number from 0 to 1844674407370955"},
      {"train --memory-limit-mb 1e300", "--memory-limit-mb 1e+300 must be 0 (no limit) or a"},
      {"train --bucket-cap-mb 1e300", "positive size of at most 2^40 MiB (1 EiB)"},
      {"devices --bandwidth-mb 1e30", "--bandwidth-mb 1e+30 must be 0 (do not measure)"},
      {"train --weight-decay inf", "--weight-decay inf must be 0 or more, and finite"},
      {"train --lr nan", "--lr nan must be 0 or a positive number, and finite"},
  };
  expect_refused(cases, {});
}

TEST(CliValues, TextThatIsNoNumberIsNamedAsSuchWithTheNumberMeant) {
  // CLI11 2.1 said "Could not convert: --batch = 1,x", the whole list and no reason.
  const Case cases[] = {
      {"train --batch 3.5", "--batch: 3.5 is not a whole number (see scalescope train --help)"},
      {"train --steps 1e3 --lr -1", "--steps: 1e3 is not a whole number (write 1000)"},
      {"sweep --batch 8,64.0", "--batch: 64.0 is not a whole number (write 64)"},
      {"sweep --batch 1,x", "--batch: x is not a whole number ("},
      {"train --seed 1e30 --lr -1", "--seed: 1e30 is not a whole number ("},  // no 'write'
      {"train --lr abc", "--lr: abc is not a number"},
      {"sweep --bucket-cap-mb 25,2x", "--bucket-cap-mb: 2x is not a number"},
  };
  expect_refused(cases, {"Could not convert"});
}

// On a CPU without AVX-512 oneDNN 2.6 creates no bf16 primitive: bf16 on CPU (and `sim`)
// devices is refused by name before training, where it failed inside the first layer's kernel
// with oneDNN's "could not create a primitive descriptor iterator". oneDNN's ISA limit stands
// in for such a CPU.
TEST(CliValues, Bf16OnACpuWithoutAvx512IsRefusedNamingWhy) {
  for (const char* devices : {"cpu:1", "sim:1"}) {
    const scalescope::testing_util::CliResult r = run_cli(
        std::string("train --model dense-100 --steps 1 --precision bf16 --devices ") + devices,
        "ONEDNN_MAX_CPU_ISA=AVX2");
    EXPECT_EQ(r.status, 1) << devices << " gave: " << r.output;
    EXPECT_TRUE(contains(r.output, "oneDNN 2.6's bf16 kernels need AVX-512, which this CPU lacks"))
        << devices << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, "primitive descriptor")) << r.output;
  }
  // fp32 still runs there.
  const scalescope::testing_util::CliResult fp32 =
      run_cli("train --model dense-100 --steps 2 --batch 8 --no-eval --devices cpu:1",
              "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(fp32.status, 0) << fp32.output;
  // `devices` says so before any run.
  const scalescope::testing_util::CliResult devices = run_cli("devices", "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_EQ(devices.status, 0) << devices.output;
  EXPECT_TRUE(contains(devices.output,
                       "precisions fp32 (not tf32: TF32 is a format of GPU tensor cores; not "
                       "bf16: oneDNN 2.6's bf16 kernels need AVX-512, which this CPU lacks; not "
                       "fp16: oneDNN 2.6 has no fp16 kernels for CPUs)"))
      << devices.output;
  EXPECT_TRUE(contains(devices.output,
                       "precisions fp32, fp16 (not tf32: TF32 is a format of GPU "
                       "tensor cores; not bf16: oneDNN 2.6's bf16 kernels"))
      << devices.output;
}

// `models --batch` plans what it is given: a batch past the kernels' 2^31 - 1 rows stopped the
// process with SIGFPE inside oneDNN (mlp-41m from 2^32, cifar-cnn at 2^40) or overflowed the
// plan's sizes (2^62); it is refused by name, as a usage error.
TEST(CliValues, ABatchPastTheKernelsRowsIsRefusedNotACrash) {
  for (const char* args :
       {"models mlp-41m --batch 4294967296", "models cifar-cnn --batch 4611686018427387904"}) {
    const scalescope::testing_util::CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_TRUE(contains(r.output, "more than the 2^31 - 1 rows the kernels' libraries index"))
        << args << " gave: " << r.output;
  }
}

// Integers are decimal whatever zeros lead them, as users write them: CLI11 2.1 reads base 0,
// where `--batch 010` was a batch of 8 and `--batch 09` not a number. Hexadecimal stays.
TEST(CliValues, LeadingZerosDoNotMakeAnIntegerOctal) {
  const std::pair<const char*, const char*> cases[] = {
      {"010", "at batch 10 "}, {"09", "at batch 9 "}, {"0x10", "at batch 16 "}};
  for (const auto& [batch, planned] : cases) {
    const scalescope::testing_util::CliResult r =
        run_cli(std::string("models gpt:preset=micro --batch ") + batch);
    EXPECT_EQ(r.status, 0) << batch << " gave: " << r.output;
    EXPECT_TRUE(contains(r.output, planned)) << batch << " gave: " << r.output;
  }
}

// The sweep command takes each model and batch size once
// (SweepGrid.AModelOrBatchGivenTwiceIsOnePoint): 010 and 10 are the same batch.
TEST(CliValues, ASweepRunsAPointGivenTwiceOnce) {
  const std::string report = ::testing::TempDir() + "/twice.json";
  const scalescope::testing_util::CliResult r = run_cli(
      "sweep --batch 010,10 --devices cpu:1 --steps 2 --repeats 1 --models "
      "dense-100,dense-100 -o " +
      report);
  EXPECT_EQ(r.status, 0) << r.output;
  size_t done = 0;
  for (size_t at = r.output.find("done: "); at != std::string::npos;
       at = r.output.find("done: ", at + 1)) {
    ++done;
  }
  EXPECT_EQ(done, 1u) << r.output;
  EXPECT_TRUE(contains(r.output, "done: dense-100 cpu:1 batch 10:")) << r.output;
  EXPECT_TRUE(contains(r.output, "models: dense-100\n")) << r.output;
}

// A report or config file with a wrong value is the user's input: the message names the file
// and the key, without the source line that read it ("at json_reader.cpp:50" until now, in
// `compare`'s status-2 message too); --verbose adds the line.
TEST(CliValues, ABadFileIsNamedWithoutOurSourceLine) {
  const std::string file = ::testing::TempDir() + "/bad-schema.json";
  std::ofstream(file) << R"({"schema": "scalescope-sweep", "schema_version": 999, "points": []})";
  for (const std::string& args : {"report " + file, "compare " + file + " " + file}) {
    const scalescope::testing_util::CliResult r = run_cli(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(contains(r.output, "'schema_version' must be a string, not number (999)"))
        << args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << " gave: " << r.output;
  }
  EXPECT_TRUE(contains(run_cli("report " + file + " --verbose").output, "json_reader.cpp:"));
  // --verbose=VALUE as any flag: yes adds the line, no does not (it did neither: CLI11 took it
  // and no debug logging followed), and a value neither yes nor no is named.
  EXPECT_TRUE(contains(run_cli("report " + file + " --verbose=yes").output, "json_reader.cpp:"));
  EXPECT_FALSE(contains(run_cli("report --verbose=0 " + file).output, ".cpp:"));
  const scalescope::testing_util::CliResult unclear = run_cli("report " + file + " --verbose=x");
  EXPECT_EQ(unclear.status, 2);
  EXPECT_TRUE(contains(unclear.output, "scalescope: error: --verbose: 'x' is neither yes nor no"))
      << unclear.output;
  // analyze's traces the same way, and a folder without traces; a directory where a file is read
  // says so (it read as empty text: "not valid JSON").
  const std::string folder = ::testing::TempDir() + "/no-traces";
  std::filesystem::create_directories(folder);
  const std::pair<std::string, const char*> traces[] = {
      {"analyze " + file, "not a Chrome trace: no 'traceEvents' array"},
      {"analyze " + folder, "is a directory without traces (files named *.json"},
      {"report " + ::testing::TempDir(), "it is a directory; name the files in it"}};
  for (const auto& [args, message] : traces) {
    const scalescope::testing_util::CliResult r = run_cli(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(contains(r.output, message)) << args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << " gave: " << r.output;
  }
  const scalescope::testing_util::CliResult resume = run_cli("sweep --resume " + file + "-gone");
  EXPECT_TRUE(contains(resume.output, "-gone': No such file or directory")) << resume.output;
  EXPECT_FALSE(contains(resume.output, ".cpp:")) << resume.output;
}

// A config file that names an option twice ran with the last of the two, silently; now it is
// refused, naming the key (this config ran 2 steps).
TEST(CliValues, AConfigFileThatGivesAKeyTwiceIsRefused) {
  const std::string file = ::testing::TempDir() + "/twice.json";
  std::ofstream(file) << R"({"model": "dense-100", "steps": 1, "batch": 8, "steps": 2})";
  const scalescope::testing_util::CliResult r = run_cli("train -q --no-eval --config " + file);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "config file " + file + " gives the key 'steps' twice"))
      << r.output;
  EXPECT_FALSE(contains(r.output, ".cpp:")) << r.output;
}

// The data files and checkpoints the user names are their input too: what is wrong in them, a
// batch larger than their samples, data the model cannot take, or a crop or flip the samples
// cannot take, reads without our source line ("at idx.cpp:204", "at checkpoint.cpp:256", "at
// sampler.cpp:29", "at data.cpp:29", "at transforms.cpp:118" until now), in a sweep's failed
// point as well.
TEST(CliValues, ABadDataFileOrCheckpointIsNamedWithoutOurSourceLine) {
  const std::string dir = ::testing::TempDir() + "/bad-data";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/train-images-idx3-ubyte") << "abc";
  std::ofstream(dir + "/train-labels-idx1-ubyte") << "abc";
  std::ofstream(dir + "/data_batch_1.bin") << std::string(1000, 'x');
  const std::string checkpoint = dir + "/bad.safetensors";
  std::ofstream(checkpoint) << std::string(300, '\xff');
  std::ofstream(dir + "/tiny.txt") << "a";
  const std::pair<std::string, const char*> cases[] = {
      {"--data idx:" + dir, "too short for an IDX magic"},
      {"--data cifar10:" + dir, "not a whole number of 3073-byte records"},
      {"--load " + checkpoint, "is larger than the 292 bytes that follow it"},
      {"--data text:" + dir + "/tiny.txt --model gpt:preset=mini", "make 0 sequence(s) of 128"},
      {"--data text:" + dir + "/tiny.txt --model cifar-cnn", "is text, read as byte tokens"},
      {"--model cifar-cnn --crop-padding 40", "crop padding 40 must be smaller than the image's"},
      {"--model mlp --flip", "a random flip needs images [H, W, C]"}};
  for (const auto& [args, message] : cases) {
    const scalescope::testing_util::CliResult r = run_cli("train --steps 1 -q " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(contains(r.output, message)) << args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << " gave: " << r.output;
  }
  const std::string mnist = "/usr/share/datasets/fashion-mnist";  // the README's setup's
  if (!std::filesystem::exists(mnist)) GTEST_SKIP() << mnist << " is not installed";
  const scalescope::testing_util::CliResult sweep = run_cli(
      "sweep --models cifar-cnn --devices cpu:1 --batch 20 --steps 2 --train-samples 10 "
      "--data idx:" +
      mnist + " -o " + dir + "/sweep.json");
  EXPECT_TRUE(contains(sweep.output, "FAILED: cifar-cnn cpu:1 batch 20: global batch 20"))
      << sweep.output;
  EXPECT_TRUE(contains(sweep.output, "larger than the dataset's 10 samples")) << sweep.output;
  EXPECT_FALSE(contains(sweep.output, ".cpp:")) << sweep.output;
  const scalescope::testing_util::CliResult wide =
      run_cli("train --steps 1 -q --model mlp-41m --data idx:" + mnist);
  EXPECT_TRUE(contains(wide.output, "cannot take the samples")) << wide.output;
  EXPECT_FALSE(contains(wide.output, ".cpp:")) << wide.output;
}

// A broken checkpoint is refused before the run sets up its data, model and communicators,
// by the process that checks its options, without a replica's "[rank 0]".
TEST(CliValues, ABrokenCheckpointIsRefusedBeforeTheRunStarts) {
  const std::string dir = ::testing::TempDir() + "/broken-checkpoint";
  std::filesystem::create_directories(dir);
  const std::string weights = dir + "/ckpt.safetensors";
  const std::string state = dir + "/ckpt.optim.safetensors";
  const std::string train = "train --model dense-100 --batch 8 --steps 1 --no-eval ";
  ASSERT_EQ(run_cli(train + "-q --save " + weights).status, 0);
  ASSERT_EQ(run_cli(train + "-q --load " + weights).status, 0);
  std::ofstream(state, std::ios::trunc) << "abc";
  for (const std::string devices : {"cpu:1", "cpu:2"}) {
    const scalescope::testing_util::CliResult r =
        run_cli(train + "--devices " + devices + " --load " + weights);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output, "scalescope: error: safetensors file '" + state +
                            "' is 3 bytes long, shorter than the 8-byte header length\n");
  }
}

// `train -o DIR` and `--save DIR` trained and then failed to write, the run lost; now refused
// before the first step.
TEST(CliValues, AnOutputThatIsADirectoryIsRefusedBeforeTraining) {
  for (const char* flag : {"-o", "--save", "--trace"}) {
    const scalescope::testing_util::CliResult r = run_cli(
        std::string("train --model dense-100 --steps 2 ") + flag + " " + ::testing::TempDir());
    EXPECT_NE(r.status, 0) << flag;
    EXPECT_TRUE(contains(r.output, "it is a directory; name a file in it")) << r.output;
    EXPECT_FALSE(contains(r.output, "step      1")) << r.output;
  }
}

TEST(CliValues, AnUnknownLogLevelIsNamedAndInfoIsUsed) {
  ASSERT_EQ(setenv("SCALESCOPE_LOG", "shouty", 1), 0);
  const scalescope::testing_util::CliResult r = run_cli("models cifar-cnn");
  unsetenv("SCALESCOPE_LOG");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "SCALESCOPE_LOG=shouty: not a level (debug, info, warn, error"))
      << r.output;
  EXPECT_EQ(scalescope::parse_log_level("warn"), scalescope::LogLevel::kWarn);
  EXPECT_EQ(scalescope::parse_log_level("off"), scalescope::LogLevel::kOff);
  EXPECT_EQ(scalescope::parse_log_level("WARN"), std::nullopt);
}

}  // namespace
