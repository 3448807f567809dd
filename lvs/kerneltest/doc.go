// Package kerneltest checks the lvs writer against a real Linux kernel with
// IP Virtual Server support, which the build machines' kernels lack.
//
// Its test, built only with the ipvskernel tag (make test-ipvs), boots
// Debian's user-mode Linux with an initramfs whose /init is the test binary
// itself (built static, CGO_ENABLED=0). Inside the guest the binary sees it
// is PID 1, loads ip_vs, creates a UDP service with three DirectRoute real
// servers, runs one weighter cycle through the lvs writer, checks the result
// by netlink and by ipvsadm -Ln, prints a PASS or FAIL marker and powers off.
// The host side reads the marker from the console. See lvs/README.md.
package kerneltest
