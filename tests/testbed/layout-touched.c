// `layout.sh`'s tracer: runs a program with a one-shot breakpoint at the entry of each candidate
// function and appends each function's name to a file the first time any of its threads enters
// it. It finds what a profile of instrumented code cannot: the functions of the standard
// library (built without the instrumentation) and of C code that a host runs.
//
// usage: layout-touched CANDIDATES OUT PROGRAM ARGS...
//   CANDIDATES: lines "<hex address in PROGRAM's file> <name>"; OUT: appended to, a name a line.
// SIGTERM and SIGINT are passed on to the program; the tracer exits as the program did.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

struct candidate {
  uint64_t address;
  char *name;
  unsigned char original;
  int armed;
};

static struct candidate *candidates;
static size_t count;
static pid_t program;

static int by_address(const void *a, const void *b) {
  uint64_t x = ((const struct candidate *)a)->address, y = ((const struct candidate *)b)->address;
  return x < y ? -1 : x > y;
}

/* The first candidate at `address`, or NULL. */
static struct candidate *at(uint64_t address) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (candidates[mid].address < address) lo = mid + 1; else hi = mid;
  }
  return lo < count && candidates[lo].address == address ? &candidates[lo] : NULL;
}

static void pass_on(int signal) { kill(program, signal); }

static void read_candidates(const char *path) {
  FILE *in = fopen(path, "r");
  if (!in) { perror(path); exit(2); }
  size_t room = 1 << 16;
  candidates = malloc(room * sizeof *candidates);
  char line[8192];
  while (fgets(line, sizeof line, in)) {
    char *space = strchr(line, ' ');
    if (!space) continue;
    *space = 0;
    space[strcspn(space + 1, "\n") + 1] = 0;
    if (count == room) candidates = realloc(candidates, (room *= 2) * sizeof *candidates);
    candidates[count++] = (struct candidate){strtoull(line, NULL, 16), strdup(space + 1), 0, 0};
  }
  fclose(in);
  qsort(candidates, count, sizeof *candidates, by_address);
}

/* Where PROGRAM's file is mapped from offset 0: its load address. */
static uint64_t load_address(void) {
  char path[64], exe[4096], line[8192];
  snprintf(path, sizeof path, "/proc/%d/exe", program);
  ssize_t n = readlink(path, exe, sizeof exe - 1);
  exe[n < 0 ? 0 : n] = 0;
  snprintf(path, sizeof path, "/proc/%d/maps", program);
  FILE *maps = fopen(path, "r");
  uint64_t found = 0;
  while (!found && fgets(line, sizeof line, maps)) {
    uint64_t lo, hi, offset;
    char file[4096] = "";
    if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &offset, file) >= 3 && offset == 0 &&
        !strcmp(file, exe))
      found = lo;
  }
  fclose(maps);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: layout-touched CANDIDATES OUT PROGRAM ARGS...\n");
    return 2;
  }
  read_candidates(argv[1]);
  FILE *out = fopen(argv[2], "a");
  if (!out) { perror(argv[2]); return 2; }
  program = fork();
  if (program == 0) {
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    execv(argv[3], argv + 3);
    perror(argv[3]);
    _exit(127);
  }
  int status;
  waitpid(program, &status, 0); /* stopped at its exec, or gone: it could not be run */
  if (!WIFSTOPPED(status)) return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
  ptrace(PTRACE_SETOPTIONS, program, 0, PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL);
  signal(SIGTERM, pass_on);
  signal(SIGINT, pass_on);
  uint64_t base = load_address();
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", program);
  int memory = open(path, O_RDWR);
  const unsigned char trap = 0xCC;
  for (size_t i = 0; i < count; i++) {
    uint64_t address = base + candidates[i].address;
    if ((i == 0 || candidates[i].address != candidates[i - 1].address) &&
        pread(memory, &candidates[i].original, 1, address) == 1 && pwrite(memory, &trap, 1, address) == 1)
      candidates[i].armed = 1;
  }
  ptrace(PTRACE_CONT, program, 0, 0);
  for (;;) {
    pid_t thread = waitpid(-1, &status, __WALL);
    if (thread < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (thread != program) continue;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    int signal = WSTOPSIG(status), deliver = signal;
    if (signal == SIGTRAP && status >> 16) {
      deliver = 0; /* a clone event: the new thread is traced too */
    } else if (signal == SIGSTOP) {
      deliver = 0; /* a new thread's first stop */
    } else if (signal == SIGTRAP) {
      struct user_regs_struct registers;
      ptrace(PTRACE_GETREGS, thread, 0, &registers);
      uint64_t address = registers.rip - 1;
      struct candidate *hit = address >= base ? at(address - base) : NULL;
      if (hit) {
        /* Put the original byte back once; another thread that trapped on it meanwhile only
           steps back. */
        if (hit->armed) {
          pwrite(memory, &hit->original, 1, address);
          hit->armed = 0;
          for (struct candidate *c = hit; c < candidates + count && c->address == hit->address; c++)
            fprintf(out, "%s\n", c->name);
          fflush(out);
        }
        registers.rip = address;
        ptrace(PTRACE_SETREGS, thread, 0, &registers);
        deliver = 0;
      }
    }
    ptrace(PTRACE_CONT, thread, 0, deliver);
  }
}
