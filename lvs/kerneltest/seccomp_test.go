//go:build ipvskernel

package kerneltest

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// envUMLExec makes the test binary a launcher: it installs the seccomp
// filter below, then execs the user-mode kernel named by the variable.
const envUMLExec = "IPVS_KERNELTEST_EXEC_UML"

// Why the filter: UML 6.1 saves a guest's FPU state with
// PTRACE_GETREGSET/SETREGSET(NT_X86_XSTATE) in a fixed 832-byte buffer, but
// hosts with AVX-512 or AMX have a larger XSAVE area and the host kernel
// rejects a short SETREGSET with EFAULT ("userspace - ptrace set fp regs
// failed, errno = 14", then a panic). UML probes XSTATE support once with
// GETREGSET and otherwise falls back to PTRACE_GETFPREGS (the 512-byte FXSAVE
// area), which works on every x86-64 host. Failing that one probe with EIO
// selects the fallback. The guest then must not rely on AVX state across
// thread switches, so it boots with GODEBUG turning AVX off (see boot).
const (
	ptraceGetRegset = 0x4204
	ntX86XState     = 0x202
	auditArchX86_64 = 0xc000003e
)

func xstateFilter() []unix.SockFilter {
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	return []unix.SockFilter{
		{Code: ld, K: 4}, // seccomp_data.arch
		{Code: jeq, Jt: 0, Jf: 6, K: auditArchX86_64},
		{Code: ld, K: 0}, // nr
		{Code: jeq, Jt: 0, Jf: 4, K: unix.SYS_PTRACE},
		{Code: ld, K: 16}, // args[0] (request), low word
		{Code: jeq, Jt: 0, Jf: 2, K: ptraceGetRegset},
		{Code: ld, K: 32}, // args[2] (regset type), low word
		{Code: jeq, Jt: 1, Jf: 0, K: ntX86XState},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EIO)},
	}
}

// execUML never returns on success.
func execUML(kernel string) error {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	f := xstateFilter()
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return unix.Exec(kernel, append([]string{kernel}, os.Args[1:]...), os.Environ())
}
