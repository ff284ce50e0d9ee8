// hide-avx512.so: an LD_PRELOAD library under which a process sees its CPU without AVX-512, so
// that ember, the gemm crate, PyTorch and XLA all take the paths they take on an AVX2 machine.
// `HIDE_AVX512=1 make bench-peers` builds and uses it.
//
// How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, 0; `cpuid_fault` in /proc/cpuinfo:
// KVM guests, Intel CPUs since Ivy Bridge) makes the CPUID instruction raise SIGSEGV. The
// handler runs the real CPUID with faulting briefly off, clears the AVX-512 and AMX bits of
// leaf 7 (and AVX10's) and steps over the instruction. The setting is per thread, inherited by
// new threads and reset by execve, so each process of a run loads the library again
// (LD_PRELOAD is inherited). The kernel rewrites the faulting setting at each switch between a
// faulting thread and another; docs/benchmarks/avx2-paths-on-zen4.md measures what that costs.
//
// The program keeps its own SIGSEGV handler (Rust's stack-overflow guard, Python's
// faulthandler): sigaction() and signal() for SIGSEGV are intercepted, the program's handler
// stored, and any SIGSEGV that is not a CPUID passed on to it.
//
// What it cannot hide or handle: glibc reads CPUID before any library loads, to pick its string
// functions (bench-peers sets GLIBC_TUNABLES for those); a library whose constructors run before
// this one's sees the real CPUID; XCR0 (xgetbv) and CPUID leaf 0xD still show the AVX-512
// state, which only code that skips leaf 7 would act on; a thread that blocks SIGSEGV dies at
// its next CPUID; handlers installed by several threads at once are not synchronised (programs
// install SIGSEGV handlers at start-up).
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012
// The x86 exception a faulting CPUID raises: general protection.
#define TRAP_GP 13

// Leaf 7, subleaf 0: EBX's AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL; ECX's VBMI, VBMI2, VNNI,
// BITALG, VPOPCNTDQ; EDX's 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, FP16, AMX-TILE, AMX-INT8.
// Subleaf 1: EAX's BF16, EDX's AVX10.
#define LEAF7_EBX \
    ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | \
     (1u << 31))
#define LEAF7_ECX ((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14))
#define LEAF7_EDX \
    ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25))
#define LEAF7_1_EAX (1u << 5)
#define LEAF7_1_EDX (1u << 19)

static struct sigaction program_handler;
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static long cpuid_faulting(int on) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0 : 1); }

static void hidden_cpuid(greg_t *reg) {
    unsigned leaf = reg[REG_RAX], sub = reg[REG_RCX], a, b, c, d;
    cpuid_faulting(0);
    __cpuid_count(leaf, sub, a, b, c, d);
    cpuid_faulting(1);
    if (leaf == 7 && sub == 0) {
        b &= ~LEAF7_EBX;
        c &= ~LEAF7_ECX;
        d &= ~LEAF7_EDX;
    }
    if (leaf == 7 && sub == 1) {
        a &= ~LEAF7_1_EAX;
        d &= ~LEAF7_1_EDX;
    }
    reg[REG_RAX] = a;
    reg[REG_RBX] = b;
    reg[REG_RCX] = c;
    reg[REG_RDX] = d;
    reg[REG_RIP] += 2;
}

// A SIGSEGV the program's handler does not take: the default action, which ends the process.
// A signal sent with kill() to a program that ignores SIGSEGV is ignored.
static void default_action(int sig, const siginfo_t *info) {
    if (program_handler.sa_handler == SIG_IGN && info->si_code <= 0) return;
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    real_sigaction(sig, &dfl, 0);
    raise(sig);
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    greg_t *reg = ((ucontext_t *)context)->uc_mcontext.gregs;
    // A faulting CPUID arrives as a #GP with SI_KERNEL; only then is RIP known to be readable.
    const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
    if (info->si_code == SI_KERNEL && reg[REG_TRAPNO] == TRAP_GP && ip[0] == 0x0f &&
        ip[1] == 0xa2) {
        hidden_cpuid(reg);
        return;
    }
    struct sigaction h = program_handler;
    if (h.sa_flags & SA_RESETHAND) program_handler.sa_handler = SIG_DFL;
    if ((h.sa_flags & SA_SIGINFO) && h.sa_sigaction) {
        h.sa_sigaction(sig, info, context);
    } else if (h.sa_handler != SIG_DFL && h.sa_handler != SIG_IGN) {
        h.sa_handler(sig);
    } else {
        default_action(sig, info);
    }
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV) return real_sigaction(sig, act, old);
    if (old) *old = program_handler;
    if (act) program_handler = *act;
    return 0;
}

// glibc's signal() sets the handler inside libc, past the sigaction() above.
sighandler_t signal(int sig, sighandler_t handler) {
    if (sig != SIGSEGV) {
        sighandler_t (*real_signal)(int, sighandler_t) = dlsym(RTLD_NEXT, "signal");
        return real_signal(sig, handler);
    }
    struct sigaction act = {.sa_handler = handler, .sa_flags = SA_RESTART}, old;
    sigemptyset(&act.sa_mask);
    sigaction(sig, &act, &old);
    return old.sa_handler;
}

__attribute__((constructor)) static void hide_avx512(void) {
    real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    // SA_ONSTACK: a stack overflow's fault must run on the thread's alternate stack (Rust's
    // guard sets one up), as the program's own handler asked to.
    struct sigaction sa = {
        .sa_sigaction = on_segv,
        .sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK,
    };
    sigemptyset(&sa.sa_mask);
    real_sigaction(SIGSEGV, &sa, 0);
    if (cpuid_faulting(1) != 0) {
        static const char msg[] = "hide-avx512: this kernel or CPU has no CPUID faulting\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(97);
    }
}
