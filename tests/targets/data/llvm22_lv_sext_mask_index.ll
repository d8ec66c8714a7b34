; LLVM 22.1 (llvmlite 0.50) loop vectorizer miscompile, reduced from a Cuvil kernel
; (issue 25, repro 19): Y[i] = X0[sext(4*i + (i & 3))] + X5[i & 3], i = 0..15.
;
; With -O1/-O2 (loop-vectorize on) for an AVX2 or AVX-512 CPU (haswell,
; skylake-avx512, znver4), the X5 load becomes a contiguous <8 x i32> load of
; X5[0..7] per vector iteration: lanes 4..7 read X5[4..7] (out of bounds; X5 has 4
; elements used) instead of X5[0..3].  -O0, mcpu=x86-64, or loop_vectorization=False
; are right.  Nothing in the IR licenses it: no nsw/nuw/inbounds/exact flags, no
; loop metadata; the only attribute is noalias on three arrays that do not overlap.
; It needs both loads: the sign extension of the 32-bit sum that contains (i & 3)
; (replacing sext by zext, or computing the index in i64, gives right code), and a
; second access indexed by (i & 3).  It looks as if analysing sext(4*t + (t & 3))
; (SCEV: (zext i2 {0,+,1} to i32) + {0,+,4}) leaves the uniqued i2 AddRec
; {0,+,1}<%loop> with a no-wrap flag, so (zext i2 {0,+,1} to i64) then folds to the
; affine {0,+,1}: a consecutive pointer for X5.
;
; Expected with X0[k] = 1000 + k, X5[k] = 10 * k:
;   Y = 1000 1015 1030 1045 1016 1031 1046 1061 1032 1047 1062 1077 1048 1063 1078 1093
; LLVM 22.1 -O1 -mcpu=haswell gives lanes 4..7 = 1056 1071 1086 1101 (X5[4..7]).
define void @f(ptr noalias %X0, ptr noalias %X5, ptr noalias %Y) {
entry:
  br label %loop
loop:
  %iv = phi i64 [ 0, %entry ], [ %iv.next, %loop ]
  %t = trunc i64 %iv to i32
  %m32 = and i32 %t, 3
  %t4 = shl i32 %t, 2
  %a = add i32 %m32, %t4
  %a64 = sext i32 %a to i64
  %m = and i64 %iv, 3
  %p0 = getelementptr i32, ptr %X0, i64 %a64
  %p5 = getelementptr i32, ptr %X5, i64 %m
  %v0 = load i32, ptr %p0, align 4
  %v5 = load i32, ptr %p5, align 4
  %s = add i32 %v0, %v5
  %py = getelementptr i32, ptr %Y, i64 %iv
  store i32 %s, ptr %py, align 4
  %iv.next = add i64 %iv, 1
  %ec = icmp eq i64 %iv.next, 16
  br i1 %ec, label %exit, label %loop
exit:
  ret void
}
