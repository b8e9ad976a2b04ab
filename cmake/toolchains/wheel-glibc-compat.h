/*
 * wheel-glibc-compat.h - included first into every C file of the wheel's
 * build (wheel-sysroot.cmake, -include): glibc 2.29 gave exp, exp2, log,
 * log2 and pow new symbol versions (the same results, without the old SVID
 * error handling), so code built against the Debian 11 sysroot (glibc 2.31)
 * asks for GLIBC_2.29, past manylinux_2_28. These directives bind each call
 * to the version every glibc has (x86_64: 2.2.5, aarch64: 2.17).
 */
#ifndef OEAP_WHEEL_GLIBC_COMPAT_H
#define OEAP_WHEEL_GLIBC_COMPAT_H
#if defined(__x86_64__)
#define OEAP_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define OEAP_GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef OEAP_GLIBC_BASE
__asm__(".symver exp,exp@" OEAP_GLIBC_BASE);
__asm__(".symver exp2,exp2@" OEAP_GLIBC_BASE);
__asm__(".symver log,log@" OEAP_GLIBC_BASE);
__asm__(".symver log2,log2@" OEAP_GLIBC_BASE);
__asm__(".symver pow,pow@" OEAP_GLIBC_BASE);
#endif
#endif
