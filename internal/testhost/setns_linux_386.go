package testhost

// sysSetns is setns(2)'s number; package syscall does not define it on 386.
const sysSetns = 346
