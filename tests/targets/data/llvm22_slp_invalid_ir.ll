; Cuvil fuzz case 116348315 (issue 25): LLVM 22 SLP vectorizer output fails verification
source_filename = "cuvil"
target triple = "x86_64-unknown-linux-gnu"


define i32 @main(ptr noalias align 4 %arg0.X, ptr noalias align 4 %arg1.Y) #0 {
entry:
  %t0 = alloca [16 x float], align 64
  %t1 = add i32 0, 4
  br label %for.head0
for.head0:
  %t2 = phi i32 [0, %entry], [%t3, %for.latch0]
  %t4 = icmp slt i32 %t2, %t1
  br i1 %t4, label %for.body0, label %for.end0
for.body0:
  %t5 = add i32 0, 4
  br label %for.head1
for.head1:
  %t6 = phi i32 [0, %for.body0], [%t7, %for.latch1]
  %t8 = icmp slt i32 %t6, %t5
  br i1 %t8, label %for.body1, label %for.end1
for.body1:
  %t9 = sext i32 %t2 to i64
  %t10 = mul nsw i64 %t9, 4
  %t11 = sext i32 %t6 to i64
  %t12 = add nsw i64 %t10, %t11
  %t13 = getelementptr inbounds float, ptr %arg0.X, i64 %t12
  %t14 = load float, ptr %t13, align 4
  %t15 = sext i32 %t2 to i64
  %t16 = mul nsw i64 %t15, 4
  %t17 = sext i32 %t6 to i64
  %t18 = add nsw i64 %t16, %t17
  %t19 = getelementptr inbounds float, ptr %t0, i64 %t18
  store float %t14, ptr %t19, align 4
  br label %for.latch1
for.latch1:
  %t7 = add nsw i32 %t6, 1
  br label %for.head1
for.end1:
  br label %for.latch0
for.latch0:
  %t3 = add nsw i32 %t2, 1
  br label %for.head0
for.end0:
  %t20 = add i32 0, 4
  br label %for.head2
for.head2:
  %t21 = phi i32 [0, %for.end0], [%t22, %for.latch2]
  %t23 = icmp slt i32 %t21, %t20
  br i1 %t23, label %for.body2, label %for.end2
for.body2:
  %t24 = add i32 0, 2
  br label %for.head3
for.head3:
  %t25 = phi i32 [0, %for.body2], [%t26, %for.latch3]
  %t27 = icmp slt i32 %t25, %t24
  br i1 %t27, label %for.body3, label %for.end3
for.body3:
  %t28 = add i32 0, 2
  br label %for.head4
for.head4:
  %t29 = phi i32 [0, %for.body3], [%t30, %for.latch4]
  %t31 = icmp slt i32 %t29, %t28
  br i1 %t31, label %for.body4, label %for.end4
for.body4:
  %t32 = sext i32 %t25 to i64
  %t33 = mul nsw i64 %t32, 8
  %t34 = sext i32 %t29 to i64
  %t35 = mul nsw i64 %t34, 4
  %t36 = add nsw i64 %t33, %t35
  %t37 = sext i32 %t21 to i64
  %t38 = add nsw i64 %t36, %t37
  %t39 = getelementptr inbounds float, ptr %t0, i64 %t38
  %t40 = load float, ptr %t39, align 4
  %t41 = icmp slt i32 %t21, 3
  br i1 %t41, label %ite.then0, label %ite.else0
ite.then0:
  %t42 = sext i32 %t21 to i64
  %t43 = mul nsw i64 %t42, 4
  %t44 = sext i32 %t25 to i64
  %t45 = mul nsw i64 %t44, 2
  %t46 = add nsw i64 %t43, %t45
  %t47 = sext i32 %t29 to i64
  %t48 = add nsw i64 %t46, %t47
  %t49 = add nsw i64 %t48, 4
  %t50 = getelementptr inbounds float, ptr %t0, i64 %t49
  %t51 = load float, ptr %t50, align 4
  br label %ite.end0
ite.else0:
  br label %ite.end0
ite.end0:
  %t52 = phi float [%t51, %ite.then0], [0x0000000000000000, %ite.else0]
  %t53 = fadd contract float %t40, %t52
  %t54 = sext i32 %t21 to i64
  %t55 = mul nsw i64 %t54, 4
  %t56 = sext i32 %t25 to i64
  %t57 = mul nsw i64 %t56, 2
  %t58 = add nsw i64 %t55, %t57
  %t59 = sext i32 %t29 to i64
  %t60 = add nsw i64 %t58, %t59
  %t61 = getelementptr inbounds float, ptr %arg1.Y, i64 %t60
  store float %t53, ptr %t61, align 4
  br label %for.latch4
for.latch4:
  %t30 = add nsw i32 %t29, 1
  br label %for.head4
for.end4:
  br label %for.latch3
for.latch3:
  %t26 = add nsw i32 %t25, 1
  br label %for.head3
for.end3:
  br label %for.latch2
for.latch2:
  %t22 = add nsw i32 %t21, 1
  br label %for.head2
for.end2:
  ret i32 0
}

attributes #0 = { nounwind "target-cpu"="haswell" }
