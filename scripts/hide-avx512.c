// hide-avx512.so: an LD_PRELOAD library under which a process sees its CPU without AVX-512, so
// that ember, the gemm crate, PyTorch and XLA all take the paths they take on an AVX2 machine,
// at this machine's native speed. `HIDE_AVX512=1 make bench-peers` builds and uses it.
//
// How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, 0; `cpuid_fault` in /proc/cpuinfo,
// which KVM gives every guest) makes the CPUID instruction raise SIGSEGV. The handler runs the
// real CPUID with faulting briefly off, clears the AVX-512 bits of leaf 7 and steps over the
// instruction. The setting is per thread, inherited by new threads and reset by execve, so each
// process of a run loads the library again (LD_PRELOAD is inherited).
//
// The program keeps its own SIGSEGV handler (Rust's stack-overflow guard, Python's
// faulthandler): sigaction() for SIGSEGV is intercepted, the program's handler stored, and any
// fault that is not a CPUID passed on to it.
//
// What it cannot hide: glibc reads CPUID before any library loads, to pick its string
// functions; bench-peers sets GLIBC_TUNABLES for those. Code that tests the AVX-512 state in
// XCR0 (xgetbv) without asking CPUID first would still see it; the libraries above ask CPUID.
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012

// Leaf 7, subleaf 0: EBX's AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL; ECX's VBMI, VBMI2, VNNI,
// BITALG, VPOPCNTDQ; EDX's 4VNNIW, 4FMAPS, VP2INTERSECT, FP16. Subleaf 1: EAX's BF16.
#define LEAF7_EBX \
    ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | \
     (1u << 31))
#define LEAF7_ECX ((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14))
#define LEAF7_EDX ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23))
#define LEAF7_1_EAX (1u << 5)

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
    if (leaf == 7 && sub == 1) a &= ~LEAF7_1_EAX;
    reg[REG_RAX] = a;
    reg[REG_RBX] = b;
    reg[REG_RCX] = c;
    reg[REG_RDX] = d;
    reg[REG_RIP] += 2;
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    greg_t *reg = ((ucontext_t *)context)->uc_mcontext.gregs;
    // A faulting CPUID arrives as SI_KERNEL; only then is RIP known to be readable code.
    const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
    if (info->si_code == SI_KERNEL && ip[0] == 0x0f && ip[1] == 0xa2) {
        hidden_cpuid(reg);
        return;
    }
    if ((program_handler.sa_flags & SA_SIGINFO) && program_handler.sa_sigaction) {
        program_handler.sa_sigaction(sig, info, context);
    } else if (program_handler.sa_handler != SIG_DFL && program_handler.sa_handler != SIG_IGN) {
        program_handler.sa_handler(sig);
    } else {
        // The default action: returning re-runs the faulting instruction, which now kills.
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        real_sigaction(SIGSEGV, &dfl, 0);
    }
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV) return real_sigaction(sig, act, old);
    if (old) *old = program_handler;
    if (act) program_handler = *act;
    return 0;
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
