;; The WASI calls wasi-libc links into a plugin without a plugin ever
;; needing them: snprintf brings in the stdio of stdout (fd_write, fd_seek,
;; fd_close), exit and abort bring proc_exit. This module answers them in
;; place of a WASI adapter, so that the component imports nothing from
;; WASI: writes to a file descriptor fail with EBADF (8), as the host's
;; sandbox would make them fail anyway, and exiting traps.
(module
  (func (export "fd_write") (param i32 i32 i32 i32) (result i32) i32.const 8)
  (func (export "fd_seek") (param i32 i64 i32 i32) (result i32) i32.const 8)
  (func (export "fd_close") (param i32) (result i32) i32.const 8)
  (func (export "proc_exit") (param i32) unreachable)
)
