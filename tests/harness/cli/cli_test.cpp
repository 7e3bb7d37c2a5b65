// The scalescope executable end to end: exit statuses and messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/fs.h"
#include "tests/harness/cli/run_cli.h"

namespace {

using Result = scalescope::testing_util::CliResult;
using scalescope::testing_util::contains;
using scalescope::testing_util::read_json_file;

Result run(const std::string& args) {
  return scalescope::testing_util::run_cli(args);
}

// cuBLAS loads at the first call into it (models/cuda/cublas_on_demand.cpp): a run on CPU
// devices never loads it (the loader's log, LD_DEBUG=files, names every library it opens), and
// `devices` says that the version it shows is the headers'.
TEST(Cli, ACpuRunLoadsNoCublas) {
  if (SCALESCOPE_WITH_CUDA == 0) GTEST_SKIP() << "a build without CUDA has no cuBLAS";
  const std::string out = testing::TempDir() + "/cli_no_cublas.json";
  const Result r = scalescope::testing_util::run_cli(
      "train --model dense-100 --devices cpu:1 --steps 2 -q -o " + out, "LD_DEBUG=files");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.output, "file=libcudnn")) << "no loader log";
  EXPECT_FALSE(contains(r.output, "libcublas")) << "cuBLAS was loaded";
  const Result devices = run("devices");
  EXPECT_TRUE(contains(devices.output, "(headers; not loaded)")) << devices.output;
}

TEST(Cli, TrainWritesARunFile) {
  const std::string out = testing::TempDir() + "/cli_run.json";
  const Result r = run("train --model dense-100 --batch 8 --steps 12 -q -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema_version"], "2.5");
  EXPECT_FALSE(doc.contains("layer_profile"));
  EXPECT_EQ(doc["model"]["name"], "dense-100");
  EXPECT_EQ(doc["model"]["params"], 7114);
  ASSERT_TRUE(doc.contains("kernels"));  // dense layers: oneDNN's inner products
  EXPECT_EQ(doc["kernels"][0]["pass"], "forward");
  EXPECT_EQ(doc["kernels"][0]["layout"], "NC");
  ASSERT_EQ(doc["steps"].size(), 12u);
  EXPECT_EQ(doc["steps"][11]["step"], 12);
  EXPECT_GT(doc["summary"]["step_ms_median"].get<double>(), 0.0);
}

TEST(Cli, TrainProfilesLayersWhenAsked) {
  const std::string out = testing::TempDir() + "/cli_layers.json";
  const Result r =
      run("train --model dense-100 --batch 8 --steps 6 --no-eval --profile-layers -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "layers of replica 0")) << r.output;
  EXPECT_TRUE(contains(r.output, "Dense(64)")) << r.output;
  const auto doc = read_json_file(out);
  ASSERT_EQ(doc["layer_profile"].size(), 3u);  // dense, ReLU, dense
  EXPECT_EQ(doc["layer_profile"][0]["forward_flops"], 8 * (2 * 100 * 64 + 64));
  EXPECT_GT(doc["layer_profile"][0]["backward_ms"].get<double>(), 0.0);
}

// CPU replicas with more compute threads than the process's cores took turns on them: the
// summary says so, and says nothing within the cores.
TEST(Cli, TrainSaysWhenItsReplicasSharedTheCores) {
  const int cores = scalescope::backend(scalescope::DeviceKind::kCpu).device_count();
  const std::string run_on = "train --model dense-100 --batch 8 --steps 2 --no-eval -q --devices ";
  const Result shared = run(run_on + "cpu:2 --threads " + std::to_string(cores));
  ASSERT_EQ(shared.status, 0) << shared.output;
  EXPECT_TRUE(contains(shared.output, "note: 2 devices x " + std::to_string(cores) + " thread" +
                                          (cores == 1 ? "" : "s") + " = " +
                                          std::to_string(2 * cores) + " compute threads on " +
                                          std::to_string(cores) + " usable cores"))
      << shared.output;
  const Result alone = run(run_on + "cpu:1 --threads 1");
  ASSERT_EQ(alone.status, 0) << alone.output;
  EXPECT_FALSE(contains(alone.output, "usable cores")) << alone.output;
}

// A sweep writing where the last one wrote keeps that report as NAME.old.json (the README's
// main job, run twice, replaced its first report); --resume continues its file in place.
TEST(Cli, ASweepKeepsTheReportItWouldReplace) {
  const std::string out = testing::TempDir() + "/cli_kept.json";
  const std::string old = scalescope::previous_path(out);  // cli_kept.old.json
  std::remove(out.c_str());
  std::remove(old.c_str());
  const std::string sweep =
      "sweep --models dense-100 --devices cpu:1 --steps 2 --repeats 1 "
      "--max-warmup-steps 1 -q -o " +
      out + " --batch ";
  ASSERT_EQ(run(sweep + "4").status, 0);
  const std::string first = scalescope::read_file(out);
  const Result again = run(sweep + "8");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "the report already in " + out + " is kept as " + old))
      << again.output;
  EXPECT_EQ(scalescope::read_file(old), first);
  EXPECT_EQ(read_json_file(out)["points"][0]["batch"], 8);
  std::remove(old.c_str());
  const Result resumed = run("sweep -q --resume " + out);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_FALSE(contains(resumed.output, "kept as")) << resumed.output;
  EXPECT_FALSE(std::filesystem::exists(old));
}

// -q prints only the summary: no step lines and no evaluation lines (those came through).
TEST(Cli, QuietTrainingPrintsOnlyItsSummary) {
  const std::string run_on = "train --model dense-100 --batch 8 --steps 4 --eval-every 2";
  const Result loud = run(run_on);
  ASSERT_EQ(loud.status, 0) << loud.output;
  EXPECT_TRUE(contains(loud.output, "eval after epoch")) << loud.output;
  const Result quiet = run(run_on + " -q");
  ASSERT_EQ(quiet.status, 0) << quiet.output;
  EXPECT_FALSE(contains(quiet.output, "eval after")) << quiet.output;
  EXPECT_FALSE(contains(quiet.output, "step      1")) << quiet.output;
  EXPECT_TRUE(contains(quiet.output, "median step")) << quiet.output;
}

// The summary names the precision; an fp16 run adds its loss scaling, others do not.
TEST(Cli, TrainingSaysItsPrecisionAndLossScaling) {
  const Result fp16 =
      run("train --model dense-100 --batch 8 --steps 3 --devices sim:1 --precision fp16 -q");
  ASSERT_EQ(fp16.status, 0) << fp16.output;
  EXPECT_TRUE(contains(fp16.output, "global batch 8, adam, fp16: median step")) << fp16.output;
  EXPECT_TRUE(contains(fp16.output,
                       "loss scaling: scale 65536 after the last step (from 65536); "
                       "no step skipped\n"))
      << fp16.output;
  const Result fp32 = run("train --model dense-100 --batch 8 --steps 3 -q");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_TRUE(contains(fp32.output, ", adam, fp32: median step")) << fp32.output;
  EXPECT_FALSE(contains(fp32.output, "loss scaling")) << fp32.output;
}

TEST(Cli, PipelineBenchReportsEachWorkerCount) {
  const std::string out = testing::TempDir() + "/cli_pipeline_bench.json";
  const Result r =
      run("pipeline-bench --model dense-100 --workers 1,2 --batch 32 --batches 20 -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["points"].size(), 2u);
  EXPECT_EQ(doc["points"][1]["workers"], 2);
  EXPECT_GT(doc["points"][0]["samples_per_second"].get<double>(), 0.0);
}

// A CIFAR-10 directory of two records a file, label 0, every pixel byte `pixel_step` times its
// index (mod 256).
void write_cifar10(const std::string& dir, int pixel_step) {
  std::filesystem::create_directories(dir);
  std::string records(2 * 3073, '\0');
  for (size_t i = 0; i < records.size(); ++i) {
    if (i % 3073 != 0) records[i] = static_cast<char>((i * pixel_step) % 256);
  }
  for (const char* name : {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                           "data_batch_5", "test_batch"}) {
    std::ofstream(dir + "/" + name + ".bin", std::ios::binary) << records;
  }
}

// A Linux path need not be UTF-8; the results naming it were lost to nlohmann's refusal to
// write such text ("internal error: invalid UTF-8 byte") after the measurement.
TEST(Cli, PipelineBenchWritesItsResultsForADataPathThatIsNotUtf8) {
  const std::string dir = testing::TempDir() + "/cifar-\xff";
  std::filesystem::create_directories(dir);
  write_cifar10(dir, 1);
  const std::string out = testing::TempDir() + "/cli_pipeline_bench_path.json";
  const Result r = run("pipeline-bench --data 'cifar10:" + dir +
                       "' --model cifar-cnn --workers 1 --batch 2 --batches 3 -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json doc = read_json_file(out);
  EXPECT_TRUE(contains(doc.at("data").get<std::string>(), "/cifar-\xef\xbf\xbd")) << doc.dump();
}

// Normalised by a spread of 0, every input became NaN; the error named no option and gave our
// source line ("normalisation stddev[0] = 0 must be positive and finite at transforms.cpp:108").
TEST(Cli, DataOfOneValueIsRefusedForNormalisingNamingTheWayOut) {
  const std::string dir = testing::TempDir() + "/cifar-black";
  write_cifar10(dir, 0);
  const std::string args = "pipeline-bench --data cifar10:" + dir +
                           " --model cifar-cnn --workers 1 --batch 2 --batches 3";
  const Result r = run(args);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "channel 0 holds 0 in every sample")) << r.output;
  EXPECT_TRUE(contains(r.output, "--no-normalize")) << r.output;
  EXPECT_FALSE(contains(r.output, ".cpp:")) << r.output;
  EXPECT_EQ(run(args + " --no-normalize").status, 0);
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroStatus) {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"train --model resnet9", "unknown model 'resnet9'"},
      {"train --model cnn:depth=3", "no parameter 'depth'"},
      {"train --batch 0", "--batch 0"},
      {"train --batch -5", "--batch -5"},
      {"train --steps 0", "--steps 0"},
      {"train --batch abc", "--batch"},
      {"train --optimizer rmsprop", "rmsprop"},
      {"train --devices tpu:2", "tpu:2"},
      {"train --lr -1", "--lr -1"},
      {"train --load /nonexistent.safetensors --steps 1", "/nonexistent.safetensors"},
      {"train --config /nonexistent/train.json", "/nonexistent/train.json was not readable"},
      {"train --config /", "cannot read '/': it is a directory"},
      {"frobnicate", "frobnicate"},
      {"train --data nowhere", "nowhere"},
      {"train --bucket-cap-mb 0", "--bucket-cap-mb 0"},
      {"train --devices cpu:0", "cpu:0"},
      // cuda:N counts GPUs in every command; the old index lists say what to write instead.
      {"train --devices cuda:0", "cuda:N means N GPUs"},
      {"train --devices cuda:0,1", "only a sweep takes"},
      {"collectives --devices cuda:0,1", "CUDA_VISIBLE_DEVICES"},
      {"profile --devices cuda:0 --model cifar-cnn", "cuda:N means N GPUs"},
      {"train --epochs -1", "--epochs -1"},
      {"train --crop-padding -2", "--crop-padding -2"},
      {"train --ranks-per-node 2 --steps 1", "--ranks-per-node 2: "},
      {"train --ranks-per-node -1", "--ranks-per-node"},
      {"train --network-interface nope0 --steps 1", "--network-interface nope0: "},
      {"collectives --network-interface nope0", "interfaces there: lo (127.0.0.1"},
      {"models nosuchnet", "unknown model 'nosuchnet'"},
      {"models resnet:depth=19", "depth 19 is not one of torchvision's"},
      {"collectives --min-bytes 0", "--min-bytes '0' must be positive"},
      {"collectives --min-bytes 1.5K",
       "--min-bytes '1.5K' is not a whole number of K (1.5K is "
       "1536 bytes)"},
      {"collectives --min-bytes 2.5", "--min-bytes '2.5' is not a whole number of bytes"},
      {"collectives --min-bytes -1.5e30K", "'-1.5e30K' is not a whole number of K\n"},
      {"collectives --max-bytes 0.5g",
       "--max-bytes '0.5g' is not a whole number of G (0.5g is "
       "512M)"},
      {"collectives --factor 1", "--factor 1 must be at least 2"},
      {"collectives --op max", "--op 'max' is not a reduction (accepted: sum or avg)"},
      {"collectives --op summ", "--op 'summ' is not a reduction (did you mean sum?)"},
      {"pipeline-bench --workers 0", "--workers 0"},
      {"pipeline-bench --data synthetic:device", "synthetic:device"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << c.args << " gave: " << r.output;
    // Bad input is the user's to mend: no source line of ours (--verbose adds it).
    EXPECT_FALSE(contains(r.output, ".cpp:")) << c.args << " gave: " << r.output;
  }
}

}  // namespace

TEST(Cli, SweepPrintsTablesAndWritesAReportThatReportReads) {
  const std::string out = testing::TempDir() + "/cli_sweep.json";
  const std::string config = testing::TempDir() + "/cli_sweep_config.json";
  std::ofstream(config) << R"({"models": ["dense-100"], "devices": "cpu:1,2", "batch": [8],
                              "repeats": 1, "steps": 3, "max_warmup_steps": 4, "threads": 1})";
  // The flag overrides the file's repeats.
  const Result r = run("sweep --config " + config + " --repeats 2 -q -o " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dense-100 (weak scaling")) << r.output;
  EXPECT_TRUE(contains(r.output, "samples/s [95% CI]")) << r.output;
  EXPECT_TRUE(contains(r.output, "report written to " + out)) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], "scalescope-sweep");
  EXPECT_EQ(doc["config"]["repeats"], 2);
  ASSERT_EQ(doc["points"].size(), 2u);
  EXPECT_EQ(doc["points"][1]["repeats"].size(), 2u);
  EXPECT_TRUE(contains(doc["environment"]["command_line"].get<std::string>(), "--repeats 2"));
  const Result again = run("report " + out);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "dense-100 (weak scaling")) << again.output;
}

// Points that fail are rows of the tables; a sweep of which no point ran measured nothing, and
// says so with its exit status (every GPU point of 75d88d7 failed, and the sweep exited 0).
TEST(Cli, ASweepWhosePointsAllFailedExitsOneAndKeepsItsReport) {
  const std::string out = testing::TempDir() + "/cli_sweep_failed.json";
  const std::string common =
      "sweep --devices cpu:1 --models dense-100 --repeats 1 --steps 3 "
      "--threads 1 --memory-limit-mb 0.5 -q -o " +
      out;
  // 0.5 MiB holds dense-100 at batch 8 but not its activations at batch 2000.
  const Result failed = run(common + " --batch 2000");
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_TRUE(contains(failed.output, "scalescope: error: none of the sweep's 1 points ran"))
      << failed.output;
  // After the table whose rows it points to, also where stdout is a pipe.
  EXPECT_LT(failed.output.find("FAILED"), failed.output.find("none of the sweep's"))
      << failed.output;
  EXPECT_EQ(read_json_file(out)["points"][0]["status"], "failed");
  const Result some = run(common + " --batch 2000,8");
  EXPECT_EQ(some.status, 0) << some.output;
  EXPECT_TRUE(contains(some.output, "FAILED")) << some.output;
}

// Without --devices the sweep runs on the GPUs where any are visible, else on CPU devices,
// and its first line says which and why.
TEST(Cli, SweepWithoutDevicesSaysWhatItChoseAndWhy) {
  const std::string out = testing::TempDir() + "/cli_sweep_default.json";
  const Result r =
      run("sweep --models dense-100 --batch 8 --repeats 1 --steps 2 "
          "--max-warmup-steps 1 --threads 1 -o " +
          out);
  ASSERT_EQ(r.status, 0) << r.output;
  const bool gpus = !contains(run("devices").output, "no GPU:");
  EXPECT_EQ(r.output.rfind(gpus ? "sweep on cuda:1"
                                : "sweep on cpu:1,2 (no --devices given, "
                                  "and no GPU is visible (",
                           0),
            0u)
      << r.output;
  EXPECT_TRUE(contains(r.output, "models: dense-100\n")) << r.output;
}

TEST(Cli, SweepBadInputIsRefusedBeforeAnythingRuns) {
  const std::string out = testing::TempDir() + "/cli_sweep_bad.json";
  std::remove(out.c_str());
  const auto fails = [&](const std::string& args, const std::string& message) {
    const Result r = run("sweep " + args + " -q -o " + out);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << "\n" << r.output;
  };
  fails("--models nosuchnet", "nosuchnet");
  fails("--ranks-per-node 4", "runs 1; launch that many per node");
  fails("--devices cpu:1,x", "'x' is not a whole number");
  fails("--devices cuda:0,1", "asks for no GPU");
  fails("--batch 8,-1", "--batch -1 must be a positive number of samples");
  fails("--batch 8 --global-batch 16", "not both");
  fails("--global-batch 15 --devices cpu:1,2", "--global-batch 15 does not split evenly");
  fails("--config /nonexistent/ci.json", "/nonexistent/ci.json");
  fails("--resume /nonexistent/report.json", "/nonexistent/report.json");
  fails("--repeats 0", "--repeats 0");
  fails("--html " + out, "the same file as the JSON report");
  fails("--trace /nonexistent/dir/run-", "'/nonexistent/dir/run-<point>.trace.json'");
  // Nothing ran, so nothing was written.
  EXPECT_FALSE(std::ifstream(out).good());
  const Result bad_report = run("report " + std::string(SCALESCOPE_BINARY));
  EXPECT_EQ(bad_report.status, 1);
  EXPECT_TRUE(contains(bad_report.output, "is not valid JSON")) << bad_report.output;
}

TEST(Cli, ProfileWithoutNsysSaysWhatToInstall) {
  const Result r = run("profile --model dense-100 --nsys /nonexistent/nsys");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "/nonexistent/nsys is not an executable file")) << r.output;
  EXPECT_TRUE(contains(r.output, "Nsight Systems")) << r.output;
  std::string output;
  FILE* pipe = popen(
      ("PATH=/nonexistent " + std::string(SCALESCOPE_BINARY) + " profile --model dense-100 2>&1")
          .c_str(),
      "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_TRUE(contains(output, "nsys is not on PATH")) << output;
}

TEST(Cli, ProfileRunsThePointUnderNsysWithTheCaptureRange) {
  // A stand-in for nsys that logs its arguments, runs the profiled command and leaves the
  // report file nsys would.
  const std::string dir = testing::TempDir() + "/fake_nsys_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/args.log";
  {
    std::ofstream script(dir + "/nsys");
    script << "#!/bin/sh\necho \"$@\" > '" << log << "'\nout=''\n"
           << "while [ $# -gt 0 ]; do case \"$1\" in --output=*) out=\"${1#--output=}\"; shift;;"
           << " profile|--*) shift;; *) break;; esac; done\n"
           << "\"$@\" || exit $?\ntouch \"$out.nsys-rep\"\n";
  }
  std::filesystem::permissions(dir + "/nsys", std::filesystem::perms::owner_all);
  const std::string out = dir + "/point.json";
  // A mistyped setting, which the sweep nsys runs reads again: warned about once.
  const Result r = scalescope::testing_util::run_cli(
      "profile --model dense-100 --devices cpu:2 --batch 8 --steps 6 "
      "--profile-steps 2:4 --threads 1 --name " +
          dir + "/prof -o " + out + " --nsys " + dir + "/nsys",
      "SCALESCOPE_ATENTION=flash");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string warning = "SCALESCOPE_ATENTION is not a setting";
  const size_t first = r.output.find(warning);
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(warning, first + 1), std::string::npos) << r.output;
  std::ifstream in(log);
  const std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* flag : {"profile --trace=cuda,nvtx,osrt", "--capture-range=nvtx",
                           "--nvtx-capture=profile@scalescope", "--capture-range-end=stop",
                           "--profile-steps 2:4", "--repeats 1"}) {
    EXPECT_TRUE(contains(args, flag)) << flag << " missing from: " << args;
  }
  std::ifstream report(out);
  const auto doc = nlohmann::json::parse(report);
  ASSERT_EQ(doc["points"].size(), 1u);
  EXPECT_EQ(doc["points"][0]["profile"], dir + "/prof.nsys-rep");
  EXPECT_TRUE(contains(r.output, "Nsight Systems report: " + dir + "/prof.nsys-rep")) << r.output;

  const Result bad = run("profile --model dense-100 --profile-steps 5:2 --nsys " + dir + "/nsys");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.output, "--profile-steps 5:2")) << bad.output;
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// collectives: the all-reduce benchmark end to end.

TEST(Cli, CollectivesPrintsATableAndWritesJson) {
  const std::string out = testing::TempDir() + "/cli_collectives.json";
  std::remove(out.c_str());
  const Result r =
      run("collectives --devices cpu:2 --max-bytes 64K --warmup-iters 1 --iters 3 --json " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "busbw")) << r.output;
  EXPECT_TRUE(contains(r.output, "ranks combined by max")) << r.output;
  EXPECT_TRUE(contains(r.output, "Wrong values      : 0 OK")) << r.output;
  EXPECT_TRUE(contains(r.output, "the harness's α-β fit can start from this measurement"))
      << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], "scalescope-collectives");
  EXPECT_EQ(doc["ranks"], 2);
  EXPECT_EQ(doc["devices"], "cpu:2");
  EXPECT_TRUE(doc["environment"].contains("host"));
  ASSERT_EQ(doc["sizes"].size(), 14u);  // 8 B .. 64 KiB, factor 2
  EXPECT_EQ(doc["sizes"][0]["bytes"], 8);
  EXPECT_EQ(doc["sizes"][13]["bytes"], 65536);
  for (const auto& s : doc["sizes"]) {
    EXPECT_GT(s["time_us"].get<double>(), 0.0);
    EXPECT_GE(s["busbw_gbps"].get<double>(), 0.0);
    EXPECT_EQ(s["wrong"], 0);
  }
  EXPECT_GT(doc["sizes"][13]["busbw_gbps"].get<double>(), 0.0);
  EXPECT_TRUE(doc["alpha_beta"].is_object());
}

TEST(Cli, CollectivesBadFlagsAreRefusedBeforeAnythingRuns) {
  const std::string out = testing::TempDir() + "/cli_collectives_bad.json";
  std::remove(out.c_str());
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"--min-bytes 6", "--min-bytes 6"},
      {"--max-bytes 12Q", "'12Q'"},
      {"--max-bytes lots", "'lots'"},
      {"--min-bytes 1M --max-bytes 64K", "--max-bytes 65536"},
      {"--factor 1", "--factor 1"},
      {"--iters 0", "--iters 0"},
      {"--warmup-iters -1", "--warmup-iters -1"},
      {"--op max", "'max'"},
      {"--devices cuda:64", "cuda"},  // no machine has 65 GPUs (or a CPU-only build)
      {"--devices cpu:0", "cpu:0"},
      {"--timeout 0", "--timeout 0"},
  };
  for (const Case& c : cases) {
    const Result r = run("collectives " + c.args + " --json " + out);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, "#wrong")) << c.args << " ran: " << r.output;
    EXPECT_FALSE(contains(r.output, "internal error")) << c.args << " gave: " << r.output;
    // Bad input is the user's to mend: no source line of ours (--verbose adds it).
    EXPECT_FALSE(contains(r.output, ".cpp:")) << c.args << " gave: " << r.output;
  }
  EXPECT_FALSE(std::ifstream(out).good());
  const Result usage = run("collectives --iters many");
  EXPECT_EQ(usage.status, 2) << usage.output;
  EXPECT_TRUE(contains(usage.output, "many")) << usage.output;
}

TEST(Cli, DevicesListsTheCpuAndSaysWhatIsMissing) {
  const Result r = run("devices");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "cpu:N")) << r.output;
  EXPECT_TRUE(contains(r.output, "usable")) << r.output;
  EXPECT_TRUE(contains(r.output, "CUDA runtime")) << r.output;
  // Without a GPU the reason is CUDA's, and NVML's is given beside it.
  if (contains(r.output, "no GPU:")) {
    EXPECT_TRUE(contains(r.output, "; NVML: ")) << r.output;
  } else {
    EXPECT_TRUE(contains(r.output, "GPU 0")) << r.output;
  }
}

TEST(Cli, DevicesJsonHasTheSameFacts) {
  const Result r = run("devices --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["cpu"]["device"], "cpu");
  EXPECT_GT(doc["cpu"]["usable_cores"].get<int>(), 0);
  EXPECT_GT(doc["cpu"]["memory_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(doc["gpus"].is_array());
  EXPECT_TRUE(doc["peer_access"].is_array());
  EXPECT_TRUE(doc["nvml"]["loaded"].is_boolean());
  for (const char* key : {"driver", "cuda_runtime", "cudnn", "nccl", "cublas", "onednn", "gloo"}) {
    EXPECT_TRUE(doc["versions"].contains(key)) << key;
  }
  if (doc["gpus"].empty()) {
    EXPECT_TRUE(doc["gpu_error"].is_string());
    EXPECT_FALSE(doc["gpu_error"].get<std::string>().empty());
  }
  if (!doc["nvml"]["loaded"].get<bool>()) {
    EXPECT_TRUE(doc["nvml"]["error"].is_string());
  }
}

// ---------------------------------------------------------------------------------------
// What a new user reads: messages for bad values, and what train says about what it ran.

// A bad value is the user's to fix: the message names it and what would be accepted, without
// the source line a developer needs (which --verbose adds).
TEST(Cli, UsageErrorsReadWithoutASourceLocation) {
  for (const std::string args :
       {"train --lr -1", "train --steps 0", "train --global-batch 7 --devices cpu:2",
        "sweep --batch 8,-1 -q", "sweep --global-batch 15 --devices cpu:1,2 -q",
        "train --devices cuda:0,1", "sweep --devices cuda:0 -q",
        "train --load /nonexistent/ckpt.safetensors --steps 1 -q",
        "train --data cifar10:/nonexistent --steps 1 -q",
        "train --data idx:/nonexistent --steps 1 -q"}) {
    const Result r = run(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "scalescope: error: ")) << args << " gave: " << r.output;
    EXPECT_FALSE(contains(r.output, ".cpp:")) << args << " gave: " << r.output;
  }
  EXPECT_EQ(run("train --lr -1").output,
            "scalescope: error: --lr -1 must be 0 or a positive number\n");
  const Result verbose = run("train --lr -1 --verbose");
  EXPECT_EQ(verbose.status, 1);
  EXPECT_TRUE(
      contains(verbose.output, "--lr -1 must be 0 or a positive number at option_schema.cpp:"))
      << verbose.output;
  // The sweep reads its arguments again with its own options: --verbose is not among them.
  const Result sweep = run("--verbose sweep --batch 8,-1 -q");
  EXPECT_TRUE(contains(sweep.output, "--batch -1 must be a positive number of samples at "))
      << sweep.output;
}

// One replica without accumulation computes one batch size's gradient: train says that the
// noise scale cannot be estimated and what would make it estimable, and so does the run file.
TEST(Cli, TrainSaysWhyTheNoiseScaleWasNotEstimated) {
  const std::string out = testing::TempDir() + "/cli_noise_one.json";
  const Result one =
      run("train --model dense-100 --batch 8 --steps 4 -q --noise-scale --devices cpu:1 -o " + out);
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_TRUE(contains(one.output,
                       "noise scale: not estimated: one replica without accumulation computes "
                       "the gradient of one batch size only, and the noise scale compares two: "
                       "run on more devices, or with --accumulate 2 or more\n"))
      << one.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_TRUE(contains(doc["noise_scale"]["unavailable"].get<std::string>(),
                       "run on more devices, or with --accumulate 2 or more"))
      << doc["noise_scale"];
  // Two micro-batches give two batch sizes: an estimate (or why the steps gave none).
  const Result two =
      run("train --model dense-100 --batch 8 --steps 6 -q --noise-scale --accumulate 2");
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_TRUE(contains(two.output, "noise scale: B_noise ") ||
              contains(two.output, "noise scale: none over 6 steps"))
      << two.output;
}

// A CPU device's threads are its share of the cores; a GPU runs none of its own, nor does the
// simulated device that stands for one (its threads are the simulation's): the summary gives
// threads per device on CPU devices only.
TEST(Cli, TrainGivesThreadsPerDeviceOnCpuDevicesOnly) {
  const Result cpu = run("train --model dense-100 --batch 8 --steps 2 -q --devices cpu:1");
  ASSERT_EQ(cpu.status, 0) << cpu.output;
  EXPECT_TRUE(contains(cpu.output, "/device), global batch 8")) << cpu.output;
  const Result sim = run("train --model dense-100 --batch 8 --steps 2 -q --devices sim:1");
  ASSERT_EQ(sim.status, 0) << sim.output;
  EXPECT_TRUE(contains(sim.output, "dense-100 on sim:1, global batch 8")) << sim.output;
  EXPECT_FALSE(contains(sim.output, "/device)")) << sim.output;
}
