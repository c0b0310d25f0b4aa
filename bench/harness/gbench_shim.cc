// gbench_shim.cc - the C API of gbench_shim.h over Google Benchmark 1.7.1.
//
// Why C++ here and nowhere else: Google Benchmark is a C++ library. This file
// keeps every C++ type and exception on its side of the extern "C" line:
// each entry point catches everything and turns it into a tb_err status, or,
// inside a running benchmark, into SkipWithError.
//
// JSON output: a "tee" display reporter forwards every call to GB's default
// console reporter and to a JSONReporter writing to our own ofstream. That
// avoids --benchmark_out, whose failure path calls std::exit.
//
// Test: bazel test //bench:gbench_shim_test
#include "bench/harness/gbench_shim.h"

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// Arity of the instance running on this thread, so tbb_range can refuse an
// index that GB's State::range would only assert on.
thread_local int current_arity = 0;

benchmark::TimeUnit to_gb_unit(tbb_time_unit u)
{
    switch (u) {
    case TBB_US: return benchmark::kMicrosecond;
    case TBB_MS: return benchmark::kMillisecond;
    case TBB_S: return benchmark::kSecond;
    default: return benchmark::kNanosecond;
    }
}

benchmark::State &gb_state(tbb_state *st) { return *reinterpret_cast<benchmark::State *>(st); }

// Forwards to a console reporter and a JSON reporter.
class TeeReporter : public benchmark::BenchmarkReporter {
  public:
    TeeReporter(benchmark::BenchmarkReporter *console, benchmark::BenchmarkReporter *json)
        : console_(console), json_(json) {}

    bool ReportContext(const Context &context) override
    {
        bool ok = console_->ReportContext(context);
        return json_->ReportContext(context) && ok;
    }
    void ReportRuns(const std::vector<Run> &runs) override
    {
        console_->ReportRuns(runs);
        json_->ReportRuns(runs);
    }
    void Finalize() override
    {
        console_->Finalize();
        json_->Finalize();
    }

  private:
    benchmark::BenchmarkReporter *console_, *json_;
};

// Checks opts against the preconditions GB enforces with aborting CHECKs.
int options_check(const char *name, const tbb_options *o)
{
    if (o->iterations < 0 || o->repetitions < 0 || o->min_time < 0)
        return TB_FAIL(TB_ERR_INVALID, "benchmark %s: negative iterations, repetitions or min_time", name);
    if (o->iterations > 0 && o->min_time > 0)
        return TB_FAIL(TB_ERR_INVALID, "benchmark %s: set iterations or min_time, not both", name);
    if (o->n_arg_sets < 0 || (o->n_arg_sets > 0 && !o->args))
        return TB_FAIL(TB_ERR_INVALID, "benchmark %s: %d argument sets but no args", name, o->n_arg_sets);
    if (o->n_arg_sets > 0 && (o->args_per_set < 1 || o->args_per_set > TBB_MAX_ARGS_PER_SET))
        return TB_FAIL(TB_ERR_INVALID, "benchmark %s: args_per_set %d outside [1, %d]", name,
                       o->args_per_set, TBB_MAX_ARGS_PER_SET);
    if ((unsigned)o->unit > TBB_S)
        return TB_FAIL(TB_ERR_INVALID, "benchmark %s: bad time unit %d", name, (int)o->unit);
    return TB_OK;
}

void options_apply(benchmark::internal::Benchmark *b, const tbb_options *o)
{
    for (int i = 0; i < o->n_arg_sets; i++) {
        const int64_t *row = o->args + (size_t)i * (size_t)o->args_per_set;
        b->Args(std::vector<int64_t>(row, row + o->args_per_set));
    }
    if (o->iterations > 0)
        b->Iterations(o->iterations);
    if (o->repetitions > 0)
        b->Repetitions(o->repetitions);
    if (o->min_time > 0)
        b->MinTime(o->min_time);
    if (o->manual_time)
        b->UseManualTime();
    b->Unit(to_gb_unit(o->unit));
    // tunebench computes its own statistics from the repetitions.
    b->ReportAggregatesOnly(false);
}

// The C++ exception being handled, as a status naming what was being done
// (an allocation failure is TB_ERR_NOMEM, anything else TB_ERR_INTERNAL).
// REQUIRES: called inside a catch block (it rethrows to look at it).
int exception_status(const char *doing)
{
    try {
        throw;
    } catch (const std::bad_alloc &) {
        return TB_FAIL(TB_ERR_NOMEM, "%s", doing);
    } catch (const std::exception &e) {
        return TB_FAIL(TB_ERR_INTERNAL, "%s: %s", doing, e.what());
    } catch (...) {
        return TB_FAIL(TB_ERR_INTERNAL, "%s: unknown C++ exception", doing);
    }
}

} // namespace

extern "C" {

tbb_options tbb_options_default(void)
{
    tbb_options o;
    std::memset(&o, 0, sizeof o);
    o.unit = TBB_NS;
    return o;
}

int tbb_register(const char *name, tbb_fn fn, void *user, const tbb_options *opts)
{
    tbb_options o = opts ? *opts : tbb_options_default();
    if (!name || !*name || !fn)
        return TB_FAIL(TB_ERR_INVALID, "tbb_register: empty name or NULL function");
    TB_TRY(options_check(name, &o));
    int arity = o.n_arg_sets > 0 ? o.args_per_set : 0;
    try {
        benchmark::internal::Benchmark *b = benchmark::RegisterBenchmark(
            name, [fn, user, arity](benchmark::State &st) {
                current_arity = arity;
                fn(reinterpret_cast<tbb_state *>(&st), user);
                current_arity = 0;
            });
        options_apply(b, &o);
    } catch (...) {
        char doing[320]; // no allocation while an exception (maybe bad_alloc) is handled
        std::snprintf(doing, sizeof doing, "registering benchmark %s", name);
        return exception_status(doing);
    }
    return TB_OK;
}

void tbb_clear(void)
{
    try {
        benchmark::ClearRegisteredBenchmarks();
    } catch (...) {
        // Nothing to report to: clearing only frees; leave what is left.
    }
}

int tbb_run(int *argc, char **argv, const char *json_out_path, size_t *n_run)
{
    static char prog[] = "tunebench";
    char *fake_argv[] = {prog, nullptr};
    int fake_argc = 1;
    if (!argc || !argv) {
        argc = &fake_argc;
        argv = fake_argv;
    }
    if (n_run)
        *n_run = 0;
    try {
        benchmark::Initialize(argc, argv);
        benchmark::BenchmarkReporter *console = benchmark::CreateDefaultDisplayReporter();
        size_t n;
        if (!json_out_path) {
            n = benchmark::RunSpecifiedBenchmarks(console);
        } else {
            std::ofstream out(json_out_path);
            if (!out.is_open())
                return tb_error_push_errno(TB_ERR_IO, __FILE__, __LINE__, "cannot write %s", json_out_path);
            benchmark::JSONReporter json;
            json.SetOutputStream(&out);
            json.SetErrorStream(&out);
            TeeReporter tee(console, &json);
            n = benchmark::RunSpecifiedBenchmarks(&tee);
            out.close();
            if (out.fail())
                return TB_FAIL(TB_ERR_IO, "writing %s failed", json_out_path);
        }
        if (n_run)
            *n_run = n;
    } catch (...) {
        return exception_status("running benchmarks");
    }
    return TB_OK;
}

int tbb_run_quiet(char **json, size_t *len, size_t *n_run)
{
    static char prog[] = "tunebench";
    *json = nullptr;
    *len = 0;
    if (n_run)
        *n_run = 0;
    try {
        // The JSON reporter writes the executable's name, which only
        // Initialize sets; a fake argv sets it without touching other flags.
        if (!benchmark::BenchmarkReporter::Context::executable_name) {
            char *fake_argv[] = {prog, nullptr};
            int fake_argc = 1;
            benchmark::Initialize(&fake_argc, fake_argv);
        }
        std::ostringstream out, err;
        benchmark::JSONReporter rep;
        rep.SetOutputStream(&out);
        rep.SetErrorStream(&err);
        size_t n = benchmark::RunSpecifiedBenchmarks(&rep, std::string("."));
        std::string s = out.str();
        char *buf = static_cast<char *>(std::malloc(s.size() + 1));
        if (!buf)
            return TB_FAIL(TB_ERR_NOMEM, "copying Google Benchmark's JSON (%zu bytes)", s.size());
        std::memcpy(buf, s.data(), s.size());
        buf[s.size()] = 0;
        *json = buf;
        *len = s.size();
        if (n_run)
            *n_run = n;
    } catch (...) {
        return exception_status("running benchmarks");
    }
    return TB_OK;
}

int tbb_keep_running(tbb_state *st) { return gb_state(st).KeepRunning() ? 1 : 0; }

int64_t tbb_range(tbb_state *st, int i)
{
    if (i < 0 || i >= current_arity) {
        // GB only asserts here (abort); fail this run instead.
        tbb_skip_with_error(st, "tbb_range: argument index out of range");
        return 0;
    }
    return gb_state(st).range((size_t)i);
}

int64_t tbb_iterations(tbb_state *st) { return (int64_t)gb_state(st).iterations(); }

void tbb_set_iteration_time(tbb_state *st, double seconds) { gb_state(st).SetIterationTime(seconds); }

// GB CHECK-aborts on pausing or resuming after SkipWithError; a skipped run
// has no timing left to pause.
void tbb_pause_timing(tbb_state *st)
{
    if (!gb_state(st).error_occurred())
        gb_state(st).PauseTiming();
}

void tbb_resume_timing(tbb_state *st)
{
    if (!gb_state(st).error_occurred())
        gb_state(st).ResumeTiming();
}

void tbb_counter(tbb_state *st, const char *name, double value, tbb_counter_flags flags)
{
    int f = benchmark::Counter::kDefaults;
    if (flags & TBB_COUNTER_RATE)
        f |= benchmark::Counter::kIsRate;
    if (flags & TBB_COUNTER_AVG_ITERATIONS)
        f |= benchmark::Counter::kAvgIterations;
    try {
        gb_state(st).counters[name] = benchmark::Counter(value, (benchmark::Counter::Flags)f);
    } catch (...) {
        tbb_skip_with_error(st, "tbb_counter: out of memory");
    }
}

void tbb_set_label(tbb_state *st, const char *label)
{
    try {
        gb_state(st).SetLabel(label);
    } catch (...) {
        tbb_skip_with_error(st, "tbb_set_label: out of memory");
    }
}

void tbb_set_bytes_processed(tbb_state *st, int64_t bytes)
{
    try {
        gb_state(st).SetBytesProcessed(bytes);
    } catch (...) {
        tbb_skip_with_error(st, "tbb_set_bytes_processed: out of memory");
    }
}

void tbb_set_items_processed(tbb_state *st, int64_t items)
{
    try {
        gb_state(st).SetItemsProcessed(items);
    } catch (...) {
        tbb_skip_with_error(st, "tbb_set_items_processed: out of memory");
    }
}

void tbb_skip_with_error(tbb_state *st, const char *msg)
{
    // GB requires a single call per run; the first message wins.
    if (gb_state(st).error_occurred())
        return;
    try {
        gb_state(st).SkipWithError(msg);
    } catch (...) {
        // SkipWithError copies msg into a std::string; if even that fails
        // there is nothing better to do than let the run continue.
    }
}

} // extern "C"
