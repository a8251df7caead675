// The cache workloads C1-C5 of docs/peers.md on the Java peers, Caffeine
// and Guava, printing the same JSON lines as bench/cache_workloads.cc (same
// keys, same parameters, same generator and seeds), so that
// bench/cache_table.py can put them side by side. Run by bench/java/run.sh,
// which compiles it against Debian's jars (libcaffeine-java,
// libguava-java). Not part of the library's build or tests.
//
//   java -cp ... CacheBench [--impl=caffeine,guava] [--only=c1,c5]
//       [--n=1000000] [--seconds=5] [--warmup=1] [--threads=2]
//       [--trace=PATH] [--commit=REV] [--caffeine_version=V]
//       [--guava_version=V] [--json]
//
// Keys and values are Longs; C1-str and C3-str key by 36-character UUID
// text Strings, made as support/uuid_key.h makes them. For C1 and C2 the
// keys are boxed before the
// clock starts (as Caffeine's own benchmarks do), so the timed loop does no
// allocation of ours; C5 boxes each key of the trace as it replays it.

import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Expiry;
import com.google.common.cache.CacheBuilder;
import com.google.common.cache.RemovalNotification;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

public final class CacheBench {

  // ------------------------------------------------------------- flags --

  static final class Flags {
    Set<String> only = new HashSet<>();
    List<String> impls = new ArrayList<>(Arrays.asList("caffeine", "guava"));
    long n = 1_000_000;
    int c4N = 100_000;
    int c5Capacity = 100_000;
    long c5Keys = 10_000_000;
    int c5Accesses = 10_000_000;
    double seconds = 5;
    double warmup = 1;
    int threads = 2;
    boolean jsonOnly = false;
    String commit = "";
    String trace = "";
    String caffeineVersion = "unknown";
    String guavaVersion = "unknown";
    boolean c3Child = false;
    boolean c3Str = false;  // the C3 child keys by strings

    boolean wanted(String w) {
      return only.isEmpty() || only.contains(w);
    }

    static Flags parse(String[] args) {
      Flags f = new Flags();
      for (String a : args) {
        int eq = a.indexOf('=');
        String name = eq < 0 ? a : a.substring(0, eq);
        String v = eq < 0 ? "" : a.substring(eq + 1);
        switch (name) {
          case "--only":
            for (String w : v.toLowerCase(Locale.ROOT).split(",")) {
              if (!w.isEmpty()) f.only.add(w);
            }
            break;
          case "--impl":
            f.impls = new ArrayList<>(new LinkedHashSet<>(
                Arrays.asList(v.toLowerCase(Locale.ROOT).split(","))));
            break;
          case "--n": f.n = Math.max(1, Long.parseLong(v)); break;
          case "--c4_n": f.c4N = Math.max(1, Integer.parseInt(v)); break;
          case "--c5_capacity": f.c5Capacity = Math.max(1, Integer.parseInt(v)); break;
          case "--c5_keys": f.c5Keys = Math.max(1, Long.parseLong(v)); break;
          case "--c5_accesses": f.c5Accesses = Math.max(1, Integer.parseInt(v)); break;
          case "--seconds": f.seconds = Math.max(0.1, Double.parseDouble(v)); break;
          case "--warmup": f.warmup = Math.max(0, Double.parseDouble(v)); break;
          case "--threads": f.threads = Math.max(1, Integer.parseInt(v)); break;
          case "--commit": f.commit = v; break;
          case "--trace": f.trace = v; break;
          case "--caffeine_version": f.caffeineVersion = v; break;
          case "--guava_version": f.guavaVersion = v; break;
          case "--json": f.jsonOnly = true; break;
          case "--c3_child": f.c3Child = true; break;
          case "--c3_str": f.c3Str = true; break;
          default:
            System.err.println("unknown flag " + a);
            System.exit(2);
        }
      }
      return f;
    }
  }

  // --------------------------------------------- generator (as C++'s) --

  // splitmix64's finalizer, as support::Mix.
  static long mix(long x) {
    x += 0x9E3779B97F4A7C15L;
    x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
    x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
    return x ^ (x >>> 31);
  }

  // As support::UuidKey: a UUID's text form from a counter.
  static String uuidKey(long i) {
    long hi = mix(i);
    long lo = mix(hi ^ 0x5DEECE66DL);
    return String.format(Locale.ROOT, "%08x-%04x-%04x-%04x-%012x", hi >>> 32,
        (hi >>> 16) & 0xFFFF, hi & 0xFFFF, lo >>> 48, lo & 0xFFFFFFFFFFFFL);
  }

  // As support::Rng: Mix of a counter.
  static final class Rng {
    long s;

    Rng(long seed) {
      s = seed;
    }

    long next() {
      return mix(s++);
    }

    // Uniform in [0, n) for n > 0: the high 64 bits of the unsigned
    // 128-bit product, as C++'s multiply-shift.
    long below(long n) {
      long a = next();
      return Math.multiplyHigh(a, n) + ((a >> 63) & n);
    }

    long between(long lo, long hi) {
      return lo + below(hi - lo + 1);
    }

    double nextDouble() {
      return (next() >>> 11) * 0x1.0p-53;
    }
  }

  // Zipf over 1..n by rejection-inversion (Hormann and Derflinger), as
  // Apache Commons RNG's ZipfRejectionInversionSampler and
  // cache_workloads.cc's Zipf.
  static final class Zipf {
    final long n;
    final double e, hIntegralX1, hIntegralN, s;

    Zipf(long n, double exponent) {
      this.n = n;
      this.e = exponent;
      hIntegralX1 = hIntegral(1.5) - 1.0;
      hIntegralN = hIntegral(n + 0.5);
      s = 2.0 - hIntegralInverse(hIntegral(2.5) - h(2.0));
    }

    long sample(Rng rng) {
      for (;;) {
        double u = hIntegralN + rng.nextDouble() * (hIntegralX1 - hIntegralN);
        double x = hIntegralInverse(u);
        long k = (long) (x + 0.5);
        if (k < 1) {
          k = 1;
        } else if (k > n) {
          k = n;
        }
        if (k - x <= s || u >= hIntegral(k + 0.5) - h(k)) return k;
      }
    }

    double hIntegral(double x) {
      double logX = Math.log(x);
      return helper2((1.0 - e) * logX) * logX;
    }

    double h(double x) {
      return Math.exp(-e * Math.log(x));
    }

    double hIntegralInverse(double x) {
      double t = x * (1.0 - e);
      if (t < -1.0) t = -1.0;
      return Math.exp(helper1(t) * x);
    }

    static double helper1(double x) {
      if (Math.abs(x) > 1e-8) return Math.log1p(x) / x;
      return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
    }

    static double helper2(double x) {
      if (Math.abs(x) > 1e-8) return Math.expm1(x) / x;
      return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
    }
  }

  // ------------------------------------------------------------ output --

  static final class Json {
    private final StringBuilder body = new StringBuilder();

    private Json raw(String k, String v) {
      if (body.length() > 0) body.append(',');
      body.append('"').append(escape(k)).append("\":").append(v);
      return this;
    }

    Json add(String k, String v) {
      return raw(k, "\"" + escape(v) + "\"");
    }

    Json add(String k, long v) {
      return raw(k, Long.toString(v));
    }

    Json add(String k, double v) {
      if (Double.isNaN(v) || Double.isInfinite(v)) return raw(k, "null");
      return raw(k, fmtG(v));
    }

    Json add(String k, Json v) {
      return raw(k, v.toString());
    }

    void append(Json other) {
      if (other.body.length() == 0) return;
      if (body.length() > 0) body.append(',');
      body.append(other.body);
    }

    @Override
    public String toString() {
      return "{" + body + "}";
    }

    static String escape(String s) {
      StringBuilder out = new StringBuilder();
      for (char c : s.toCharArray()) {
        if (c == '"' || c == '\\') {
          out.append('\\').append(c);
        } else if (c < 0x20) {
          out.append(' ');
        } else {
          out.append(c);
        }
      }
      return out.toString();
    }

    // Six significant digits, like C's "%.6g" without the trailing zeros.
    static String fmtG(double v) {
      if (v == 0) return "0";
      java.math.BigDecimal b = new java.math.BigDecimal(v)
          .round(new java.math.MathContext(6)).stripTrailingZeros();
      double a = Math.abs(v);
      if (a >= 1e-4 && a < 1e6) return b.toPlainString();
      return b.toString().replace("E+", "e+").replace("E-", "e-");
    }
  }

  static String readFile(String path) {
    try {
      return new String(Files.readAllBytes(Paths.get(path)));
    } catch (Exception e) {
      return "";
    }
  }

  static double load1() {
    String s = readFile("/proc/loadavg").trim();
    if (s.isEmpty()) return Double.NaN;
    return Double.parseDouble(s.split("\\s+")[0]);
  }

  static long rssBytes() {
    for (String line : readFile("/proc/self/status").split("\n")) {
      if (line.startsWith("VmRSS:")) {
        return Long.parseLong(line.substring(6).trim().split("\\s+")[0]) * 1024;
      }
    }
    return -1;
  }

  static Flags flags;
  static Json machine;
  static String date;

  static Json head(String workload, String name, String impl) {
    return new Json()
        .add("workload", workload)
        .add("name", name)
        .add("impl", impl)
        .add("impl_version",
             impl.startsWith("caffeine") ? flags.caffeineVersion : flags.guavaVersion);
  }

  static void emit(Json result, String human) {
    result.add("load1", load1()).add("machine", machine).add("date", date);
    result.add("jvm", System.getProperty("java.vm.name") + " "
        + System.getProperty("java.version") + " "
        + String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments()));
    if (!flags.commit.isEmpty()) result.add("commit", flags.commit);
    if (!flags.jsonOnly) System.out.println("# " + human);
    System.out.println(result);
    System.out.flush();
  }

  static void sleepSeconds(double s) {
    try {
      Thread.sleep((long) (s * 1000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static double processCpuSeconds() {
    java.lang.management.OperatingSystemMXBean os =
        ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
    }
    return Double.NaN;
  }

  // ------------------------------------------------- the caches, uniform --

  // Keys are Longs or Strings.
  interface Bench {
    Long get(Object k);

    void put(Object k, Long v);

    long size();

    void cleanUp();
  }

  // K: Long or String, as the workload puts them (an unchecked cast).
  @SuppressWarnings("unchecked")
  static <K> Bench caffeine(com.github.benmanes.caffeine.cache.Cache<K, Long> c) {
    return new Bench() {
      public Long get(Object k) { return c.getIfPresent(k); }
      public void put(Object k, Long v) { c.put((K) k, v); }
      public long size() { return c.estimatedSize(); }
      public void cleanUp() { c.cleanUp(); }
    };
  }

  @SuppressWarnings("unchecked")
  static <K> Bench guava(com.google.common.cache.Cache<K, Long> c) {
    return new Bench() {
      public Long get(Object k) { return c.getIfPresent(k); }
      public void put(Object k, Long v) { c.put((K) k, v); }
      public long size() { return c.size(); }
      public void cleanUp() { c.cleanUp(); }
    };
  }

  // ttl: expire after write, or after access when sliding.
  static Bench make(String impl, long ttlMs, boolean sliding, long maxSize) {
    if (impl.equals("caffeine")) {
      Caffeine<Object, Object> b = Caffeine.newBuilder();
      if (ttlMs > 0) {
        if (sliding) {
          b.expireAfterAccess(ttlMs, TimeUnit.MILLISECONDS);
        } else {
          b.expireAfterWrite(ttlMs, TimeUnit.MILLISECONDS);
        }
      }
      if (maxSize > 0) b.maximumSize(maxSize);
      return caffeine(b.<Object, Long>build());
    }
    CacheBuilder<Object, Object> b = CacheBuilder.newBuilder();
    if (ttlMs > 0) {
      if (sliding) {
        b.expireAfterAccess(ttlMs, TimeUnit.MILLISECONDS);
      } else {
        b.expireAfterWrite(ttlMs, TimeUnit.MILLISECONDS);
      }
    }
    if (maxSize > 0) b.maximumSize(maxSize);
    return guava(b.<Object, Long>build());
  }

  // ------------------------------------------------------- C1 and C2 --

  static final int KEYS_PER_THREAD = 1 << 21;
  static final int STRING_KEYS_PER_THREAD = 1 << 20;  // as cache_workloads
  static final Long STRING_VALUE = 1L;

  static final class Worker {
    Object[] keys;
    long opsAtStart, opsAtEnd, cpuAtStart, cpuAtEnd, hits;
  }

  static volatile int phase;  // 0 warm-up, 1 measuring, 2 stop

  static void runThroughput(String workload, String name, String impl, Bench cache,
                            Worker[] workers, boolean setEvery20th, long ttlMs,
                            boolean sliding, String keysDesc) throws Exception {
    ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
    phase = 0;
    Thread[] threads = new Thread[workers.length];
    for (int t = 0; t < workers.length; ++t) {
      final Worker me = workers[t];
      threads[t] = new Thread(() -> {
        final Object[] keys = me.keys;
        final int mask = keys.length - 1;
        long i = 0, hits = 0, hitsAtStart = 0;
        int seen = 0;
        for (;;) {
          for (int k = 0; k < 1024; ++k, ++i) {
            Object key = keys[(int) (i & mask)];
            if (setEvery20th && i % 20 == 19) {
              // The value is the boxed key, or for a String key a boxed
              // constant: no allocation in the timed loop either way.
              cache.put(key, key instanceof Long ? (Long) key : STRING_VALUE);
            } else if (cache.get(key) != null) {
              ++hits;
            }
          }
          int p = phase;
          if (p != seen) {
            if (seen == 0) {
              me.opsAtStart = i;
              me.cpuAtStart = tmx.getCurrentThreadCpuTime();
              hitsAtStart = hits;
            }
            if (p == 2) {
              me.opsAtEnd = i;
              me.cpuAtEnd = tmx.getCurrentThreadCpuTime();
              me.hits = hits - hitsAtStart;
              break;
            }
            seen = p;
          }
        }
      });
    }
    for (Thread t : threads) t.start();
    sleepSeconds(flags.warmup);
    double proc0 = processCpuSeconds();
    long t0 = System.nanoTime();
    phase = 1;
    sleepSeconds(flags.seconds);
    phase = 2;
    long t1 = System.nanoTime();
    double proc1 = processCpuSeconds();
    for (Thread t : threads) t.join();
    long ops = 0, hits = 0, gets = 0;
    double threadCpu = 0;
    for (Worker w : workers) {
      long o = w.opsAtEnd - w.opsAtStart;
      ops += o;
      hits += w.hits;
      threadCpu += (w.cpuAtEnd - w.cpuAtStart) / 1e9;
      gets += setEvery20th ? o - o / 20 : o;
    }
    double secs = (t1 - t0) / 1e9;
    double opsPerS = ops / secs;
    Json j = head(workload, name, impl)
        .add("n", flags.n)
        .add("threads", flags.threads)
        .add("ttl_ms", ttlMs)
        .add("sliding", sliding ? 1 : 0)
        .add("keys", keysDesc)
        .add("get_fraction", setEvery20th ? 0.95 : 1.0)
        .add("warmup_seconds", flags.warmup)
        .add("seconds", secs)
        .add("ops", ops)
        .add("ops_per_s", opsPerS)
        .add("thread_cpu_ns_per_op", ops > 0 ? threadCpu * 1e9 / ops : Double.NaN)
        .add("process_cpu_s_per_s", (proc1 - proc0) / secs)
        .add("process_cpu_ns_per_op", ops > 0 ? (proc1 - proc0) * 1e9 / ops : Double.NaN)
        .add("get_hit_ratio", gets > 0 ? (double) hits / gets : Double.NaN)
        .add("size_after", cache.size())
        .add("errors", 0);
    emit(j, String.format(Locale.ROOT,
        "%s %s %s: %.2f M ops/s with %d threads; CPU %.0f ns/op on the calling "
            + "threads, %.0f ns/op for the process",
        workload, name, impl, opsPerS / 1e6, flags.threads,
        ops > 0 ? threadCpu * 1e9 / ops : Double.NaN,
        ops > 0 ? (proc1 - proc0) * 1e9 / ops : Double.NaN));
  }

  // The key of the i-th entry, as cache_workloads' KeyOf.
  static Object keyOf(long i, boolean str) {
    return str ? uuidKey(i) : (Object) mix(i);
  }

  static void populate(Bench cache, long n, boolean str) {
    for (long i = 0; i < n; ++i) cache.put(keyOf(i, str), i);
  }

  // C1, or C1-str with string keys.
  static void runC1(String impl, boolean str) throws Exception {
    long ttlMs = 10 * 60 * 1000;
    Bench cache = make(impl, ttlMs, false, 0);
    populate(cache, flags.n, str);
    Worker[] workers = new Worker[flags.threads];
    Zipf zipf = new Zipf(flags.n, 0.99);
    int perThread = str ? STRING_KEYS_PER_THREAD : KEYS_PER_THREAD;
    for (int t = 0; t < flags.threads; ++t) {
      Rng rng = new Rng(100 + t);
      workers[t] = new Worker();
      workers[t].keys = new Object[perThread];
      for (int i = 0; i < perThread; ++i) {
        workers[t].keys[i] = keyOf(zipf.sample(rng) - 1, str);
      }
    }
    runThroughput(str ? "C1-str" : "C1", "read-mostly", impl, cache, workers, true,
                  ttlMs, false, str ? "zipf0.99 string36" : "zipf0.99");
  }

  static void runC2(String impl) throws Exception {
    long ttlMs = 30 * 1000;
    Bench cache = make(impl, ttlMs, true, 0);
    populate(cache, flags.n, false);
    Worker[] workers = new Worker[flags.threads];
    for (int t = 0; t < flags.threads; ++t) {
      Rng rng = new Rng(200 + t);
      workers[t] = new Worker();
      workers[t].keys = new Object[KEYS_PER_THREAD];
      for (int i = 0; i < KEYS_PER_THREAD; ++i) {
        workers[t].keys[i] = mix(rng.below(flags.n));
      }
    }
    runThroughput("C2", "sliding", impl, cache, workers, false, ttlMs, true,
                  "uniform");
  }

  // -------------------------------------------------------------- C3 --

  static long usedHeapAfterGc() {
    for (int i = 0; i < 3; ++i) {
      System.gc();
      sleepSeconds(0.1);
    }
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  // The fresh JVM: live heap (after full GCs) and RSS, before the cache and
  // after N puts (ttl 10 min, expire after write).
  static void runC3Child(String impl) {
    long heap0 = usedHeapAfterGc();
    long rss0 = rssBytes();
    Bench cache = make(impl, 10 * 60 * 1000, false, 0);
    populate(cache, flags.n, flags.c3Str);
    cache.cleanUp();
    long heap1 = usedHeapAfterGc();
    sleepSeconds(0.5);
    long rss1 = rssBytes();
    System.out.println(heap0 + " " + heap1 + " " + rss0 + " " + rss1 + " " + cache.size());
  }

  // A 36-character key's own heap bytes with compact strings and compressed
  // oops: the String (24 B) and its byte[] (16 B header + 36, padded to 56).
  static final long STRING_KEY_HEAP_BYTES = 24 + 56;

  // C3, or C3-str with string keys (their own bytes reported apart).
  static void runC3(String impl, boolean str) throws Exception {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd = new ArrayList<>(Arrays.asList(
        java, "-cp", System.getProperty("java.class.path"), "CacheBench",
        "--c3_child", "--impl=" + impl, "--n=" + flags.n));
    if (str) cmd.add("--c3_str");
    Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    String line;
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
      line = r.readLine();
    }
    p.waitFor();
    long[] v = new long[5];
    if (line != null) {
      String[] parts = line.trim().split("\\s+");
      for (int i = 0; i < 5 && i < parts.length; ++i) v[i] = Long.parseLong(parts[i]);
    }
    double rssPer = (double) (v[3] - v[2]) / flags.n;
    double heapPer = (double) (v[1] - v[0]) / flags.n;
    long keyHeap = str ? STRING_KEY_HEAP_BYTES : 0;
    Json j = head(str ? "C3-str" : "C3", "memory", impl)
        .add("n", flags.n)
        .add("ttl_ms", 10 * 60 * 1000)
        .add("keys", str ? "string36" : "uint64")
        .add("key_bytes", str ? 36 : 8)
        .add("key_heap_bytes", keyHeap)
        .add("rss_bytes_per_entry_besides_key", rssPer - keyHeap)
        .add("live_heap_bytes_per_entry_besides_key", heapPer - keyHeap)
        .add("value_bytes", 8)
        .add("rss_bytes_per_entry", rssPer)
        .add("live_heap_bytes_per_entry", heapPer)
        .add("rss_before_bytes", v[2])
        .add("rss_after_bytes", v[3])
        .add("heap_before_bytes", v[0])
        .add("heap_after_bytes", v[1])
        .add("size", v[4])
        .add("child_jvm", "default heap flags, G1");
    emit(j, String.format(Locale.ROOT,
        "%s memory %s: %.1f B RSS per entry, %.1f B live heap per entry at %d entries",
        str ? "C3-str" : "C3", impl, rssPer, heapPer, flags.n));
  }

  // -------------------------------------------------------------- C4 --

  // N entries, ttl uniform in [1 s, 2 s] (Guava: one fixed ttl of 1.5 s, it
  // has no per-entry ttl), then no cache call for 4 s; the listener records
  // when each entry's EXPIRED notification came. Then one cleanUp() call
  // and 0.5 s: how many came once the cache was touched.
  static void runC4(String impl, boolean withScheduler) throws Exception {
    final int n = flags.c4N;
    final double quiet = 4;
    final long[] ttlNs = new long[n];
    final long[] deadlineNs = new long[n];
    final AtomicLongArray notifiedNs = new AtomicLongArray(n);
    final AtomicIntegerArray count = new AtomicIntegerArray(n);
    final AtomicLong otherCauses = new AtomicLong();
    Rng rng = new Rng(4);
    boolean guava = impl.equals("guava");
    for (int i = 0; i < n; ++i) {
      ttlNs[i] = guava ? 1_500_000_000L : rng.between(1_000_000_000L, 2_000_000_000L);
    }
    Bench cache;
    String variant = impl;
    if (!guava) {
      Caffeine<Object, Object> b = Caffeine.newBuilder();
      Caffeine<Long, Long> typed = b.<Long, Long>removalListener((k, v, cause) -> {
        long t = System.nanoTime();
        if (cause != com.github.benmanes.caffeine.cache.RemovalCause.EXPIRED) {
          otherCauses.incrementAndGet();
        } else if (count.getAndIncrement((int) (long) v) == 0) {
          notifiedNs.set((int) (long) v, t);
        }
      });
      typed.expireAfter(new Expiry<Long, Long>() {
        public long expireAfterCreate(Long k, Long v, long now) {
          return ttlNs[(int) (long) v];
        }

        public long expireAfterUpdate(Long k, Long v, long now, long current) {
          return ttlNs[(int) (long) v];
        }

        public long expireAfterRead(Long k, Long v, long now, long current) {
          return current;
        }
      });
      if (withScheduler) {
        // Caffeine >= 2.8 only; found by reflection so that this compiles
        // against Debian's 2.6.2, which has no Scheduler.
        Class<?> sched = Class.forName("com.github.benmanes.caffeine.cache.Scheduler");
        Object system = sched.getMethod("systemScheduler").invoke(null);
        typed.getClass().getMethod("scheduler", sched).invoke(typed, system);
        variant = impl + "+scheduler";
      }
      cache = caffeine(typed.build());
    } else {
      com.google.common.cache.RemovalListener<Long, Long> listener =
          (RemovalNotification<Long, Long> note) -> {
            long t = System.nanoTime();
            if (note.getCause() != com.google.common.cache.RemovalCause.EXPIRED) {
              otherCauses.incrementAndGet();
            } else if (count.getAndIncrement((int) (long) note.getValue()) == 0) {
              notifiedNs.set((int) (long) note.getValue(), t);
            }
          };
      cache = guava(CacheBuilder.newBuilder()
          .expireAfterWrite(1500, TimeUnit.MILLISECONDS)
          .removalListener(listener)
          .<Long, Long>build());
    }
    long start = System.nanoTime();
    for (int i = 0; i < n; ++i) {
      deadlineNs[i] = System.nanoTime() + ttlNs[i];
      cache.put(mix(i), (long) i);
    }
    long submitted = System.nanoTime();
    sleepSeconds(quiet);
    long[] late = new long[n];
    int notified = 0, twice = 0, early = 0;
    for (int i = 0; i < n; ++i) {
      int c = count.get(i);
      if (c == 0) continue;
      if (c > 1) ++twice;
      long t = notifiedNs.get(i);
      if (t < deadlineNs[i]) ++early;
      late[notified++] = t - deadlineNs[i];
    }
    // Then touch the cache once: what a call sets off.
    cache.cleanUp();
    sleepSeconds(0.5);
    int afterCall = 0;
    for (int i = 0; i < n; ++i) {
      if (count.get(i) > 0) ++afterCall;
    }
    long[] sorted = Arrays.copyOf(late, notified);
    Arrays.sort(sorted);
    double p50 = pct(sorted, 0.5), p99 = pct(sorted, 0.99);
    double max = notified > 0 ? sorted[notified - 1] / 1e6 : Double.NaN;
    double min = notified > 0 ? sorted[0] / 1e6 : Double.NaN;
    Json j = head("C4", "expiry-idle", variant)
        .add("n", n)
        .add("ttl_ms_min", guava ? 1500 : 1000)
        .add("ttl_ms_max", guava ? 1500 : 2000)
        .add("quiet_seconds", quiet)
        .add("submit_seconds", (submitted - start) / 1e9)
        .add("notified_expired", notified)
        .add("never_notified", n - notified)
        .add("late_ms_p50", p50)
        .add("late_ms_p99", p99)
        .add("late_ms_max", max)
        .add("late_ms_min", min)
        .add("early", early)
        .add("notified_twice", twice)
        .add("other_causes", otherCauses.get())
        .add("notified_after_one_call", afterCall)
        .add("size_after", cache.size());
    emit(j, String.format(Locale.ROOT,
        "C4 expiry with no activity, %s: %d of %d notified EXPIRED within %.0f s "
            + "(never %d); %d once cleanUp() was called",
        variant, notified, n, quiet, n - notified, afterCall));
  }

  static double pct(long[] sorted, double q) {
    if (sorted.length == 0) return Double.NaN;
    int i = (int) Math.min(sorted.length - 1, (long) (q * (sorted.length - 1)));
    return sorted[i] / 1e6;
  }

  // -------------------------------------------------------------- C5 --

  static long[] loadTrace() throws Exception {
    int count = flags.c5Accesses;
    if (!flags.trace.isEmpty()) {
      Path p = Paths.get(flags.trace);
      if (Files.exists(p) && Files.size(p) == 8L * count) {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
          MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, 8L * count);
          LongBuffer lb = buf.order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
          long[] t = new long[count];
          lb.get(t);
          traceSource = "file";
          return t;
        }
      }
    }
    long[] t = new long[count];
    Zipf zipf = new Zipf(flags.c5Keys, 0.99);
    Rng rng = new Rng(5);
    for (int i = 0; i < count; ++i) t[i] = mix(zipf.sample(rng) - 1);
    traceSource = "generated";
    return t;
  }

  static String traceSource = "";
  static long[] trace;

  static long traceChecksum(long[] t) {
    long h = 0;
    for (long k : t) h = mix(h ^ k);
    return h;
  }

  static void runC5(String impl) throws Exception {
    if (trace == null) trace = loadTrace();
    Bench cache = make(impl, 0, false, flags.c5Capacity);
    ThreadMXBean tmx = ManagementFactory.getThreadMXBean();
    long hits = 0;
    long cpu0 = tmx.getCurrentThreadCpuTime();
    long t0 = System.nanoTime();
    for (long k : trace) {
      Long key = k;
      if (cache.get(key) != null) {
        ++hits;
      } else {
        cache.put(key, key);
      }
    }
    double secs = (System.nanoTime() - t0) / 1e9;
    double cpu = (tmx.getCurrentThreadCpuTime() - cpu0) / 1e9;
    cache.cleanUp();
    double ratio = (double) hits / trace.length;
    Json j = head("C5", "hit-ratio", impl)
        .add("capacity", flags.c5Capacity)
        .add("keys", flags.c5Keys)
        .add("accesses", trace.length)
        .add("zipf_exponent", 0.99)
        .add("seed", 5)
        .add("trace", traceSource)
        .add("trace_checksum", String.format("%016x", traceChecksum(trace)))
        .add("hits", hits)
        .add("hit_ratio", ratio)
        .add("seconds", secs)
        .add("ops_per_s", trace.length / secs)
        .add("thread_cpu_ns_per_op", cpu * 1e9 / trace.length)
        .add("size_after", cache.size())
        .add("errors", 0);
    emit(j, String.format(Locale.ROOT,
        "C5 hit ratio %s: %.4f (%d of %d; capacity %d); %.2f M accesses/s",
        impl, ratio, hits, trace.length, flags.c5Capacity, trace.length / secs / 1e6));
  }

  // ------------------------------------------------------------- main --

  public static void main(String[] args) throws Exception {
    flags = Flags.parse(args);
    if (flags.c3Child) {
      runC3Child(flags.impls.get(0));
      return;
    }
    String model = "unknown";
    for (String line : readFile("/proc/cpuinfo").split("\n")) {
      if (line.startsWith("model name")) {
        model = line.substring(line.indexOf(':') + 2);
        break;
      }
    }
    machine = new Json()
        .add("cores", Runtime.getRuntime().availableProcessors())
        .add("cpu", model);
    date = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss'Z'")
        .withZone(ZoneOffset.UTC).format(Instant.now());
    boolean hasScheduler;
    try {
      Class.forName("com.github.benmanes.caffeine.cache.Scheduler");
      hasScheduler = true;
    } catch (ClassNotFoundException e) {
      hasScheduler = false;
    }
    for (String impl : flags.impls) {
      if (flags.wanted("c1")) { runC1(impl, false); usedHeapAfterGc(); }
      if (flags.wanted("c1-str")) { runC1(impl, true); usedHeapAfterGc(); }
      if (flags.wanted("c2")) { runC2(impl); usedHeapAfterGc(); }
      if (flags.wanted("c3")) runC3(impl, false);
      if (flags.wanted("c3-str")) runC3(impl, true);
      if (flags.wanted("c4")) {
        runC4(impl, false);
        if (impl.equals("caffeine") && hasScheduler) runC4(impl, true);
        usedHeapAfterGc();
      }
      if (flags.wanted("c5")) { runC5(impl); usedHeapAfterGc(); }
    }
    if (flags.wanted("c4") && flags.impls.contains("caffeine") && !hasScheduler) {
      Json j = head("C4", "expiry-idle", "caffeine+scheduler")
          .add("skipped", "Caffeine " + flags.caffeineVersion
              + " has no Scheduler (added in 2.8)");
      emit(j, "C4 caffeine+scheduler: skipped, this Caffeine has no Scheduler");
    }
    System.exit(0);
  }
}
