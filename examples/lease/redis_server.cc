#include "lease/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lease/redis_link.h"

namespace lease {
namespace {

std::string FindBinary() {
  std::vector<std::string> dirs;
  if (const char* path = getenv("PATH")) {
    dirs = absl::StrSplit(path, ':', absl::SkipEmpty());
  }
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/sbin");
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A port the kernel just handed out on 127.0.0.1; free unless someone takes
// it between now and the server's bind, which Launch() would report.
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  if (port <= 0) return absl::InternalError("no free loopback port");
  return port;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start() {
  std::string binary = FindBinary();
  if (binary.empty()) {
    return absl::NotFoundError(
        "redis-server is not installed (Debian: apt-get install redis-server)");
  }
  std::string dir =
      (std::filesystem::temp_directory_path() / "timingwheel-redis-XXXXXX")
          .string();
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", dir, " failed"));
  }
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<int> port = FreePort();
    if (!port.ok()) return port.status();
    std::unique_ptr<RedisServer> server(new RedisServer(binary, dir, *port));
    last = server->Launch();
    if (last.ok()) return server;
    server->dir_.clear();  // keep the directory for the next attempt
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return last;
}

RedisServer::~RedisServer() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status RedisServer::Launch() {
  const std::string port = absl::StrCat(port_);
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> args = {
      binary_, "--port",      port, "--bind",       "127.0.0.1", "--dir",
      dir_,    "--save",      "",   "--appendonly", "no",        "--logfile",
      log,     "--daemonize", "no"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The server dies with the thread that started it (PR_SET_PDEATHSIG), so
  // a test or program that crashes leaves no server behind; it writes to its
  // log file only, never to our stdout, which a pipe may be reading.
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {  // only async-signal-safe calls until exec
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    execv(binary_.c_str(), argv.data());
    _exit(127);
  }
  pid_ = pid;
  // Ready when it answers PING; gone if it exited (a port taken meanwhile).
  RedisLink link("127.0.0.1", port_, absl::Milliseconds(200));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return absl::UnavailableError(
          absl::StrCat("redis-server exited at start; see ", log));
    }
    absl::StatusOr<Reply> pong = link.Call({"PING"});
    if (pong.ok() && (*pong)->type == REDIS_REPLY_STATUS) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  Kill();
  return absl::DeadlineExceededError(
      absl::StrCat("redis-server did not answer within 10 s; see ", log));
}

void RedisServer::Kill() {
  if (pid_ == 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = 0;
}

absl::Status RedisServer::Restart() {
  Kill();
  return Launch();
}

}  // namespace lease
