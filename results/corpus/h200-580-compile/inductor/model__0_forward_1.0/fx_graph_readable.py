class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f16[1024]", primals_2: "f16[1024]", primals_3: "f16[64, 256, 1024]", primals_4: "f16[4096, 1024]", primals_5: "f16[4096]", primals_6: "f16[1024, 4096]", primals_7: "f16[1024]"):
        # File: /work/main/scripts/torch-device/compile_probe.py:60 in forward, code: h = self.norm(x)
        convert_element_type: "f32[64, 256, 1024]" = torch.ops.prims.convert_element_type.default(primals_3, torch.float32)
        var_mean = torch.ops.aten.var_mean.correction(convert_element_type, [2], correction = 0, keepdim = True)
        getitem: "f32[64, 256, 1]" = var_mean[0]
        getitem_1: "f32[64, 256, 1]" = var_mean[1];  var_mean = None
        add: "f32[64, 256, 1]" = torch.ops.aten.add.Tensor(getitem, 1e-05);  getitem = None
        rsqrt: "f32[64, 256, 1]" = torch.ops.aten.rsqrt.default(add);  add = None
        sub: "f32[64, 256, 1024]" = torch.ops.aten.sub.Tensor(convert_element_type, getitem_1);  convert_element_type = None
        mul: "f32[64, 256, 1024]" = torch.ops.aten.mul.Tensor(sub, rsqrt);  sub = None
        mul_1: "f32[64, 256, 1024]" = torch.ops.aten.mul.Tensor(mul, primals_1);  mul = primals_1 = None
        add_1: "f32[64, 256, 1024]" = torch.ops.aten.add.Tensor(mul_1, primals_2);  mul_1 = primals_2 = None
        convert_element_type_1: "f16[64, 256, 1024]" = torch.ops.prims.convert_element_type.default(add_1, torch.float16);  add_1 = None

        # File: /work/main/scripts/torch-device/compile_probe.py:62 in forward, code: gate = torch.sigmoid(h.sum(-1, keepdim=True))
        sum_1: "f16[64, 256, 1]" = torch.ops.aten.sum.dim_IntList(convert_element_type_1, [-1], True)
        sigmoid: "f16[64, 256, 1]" = torch.ops.aten.sigmoid.default(sum_1);  sum_1 = None

        # File: /work/main/scripts/torch-device/compile_probe.py:64 in forward, code: u = self.up(h)
        view: "f16[16384, 1024]" = torch.ops.aten.view.default(convert_element_type_1, [16384, 1024]);  convert_element_type_1 = None
        permute: "f16[1024, 4096]" = torch.ops.aten.permute.default(primals_4, [1, 0])
        addmm: "f16[16384, 4096]" = torch.ops.aten.addmm.default(primals_5, view, permute);  primals_5 = permute = None
        view_1: "f16[64, 256, 4096]" = torch.ops.aten.view.default(addmm, [64, 256, 4096])

        # File: /work/main/scripts/torch-device/compile_probe.py:66 in forward, code: u = torch.nn.functional.gelu(u) * gate
        convert_element_type_5: "f32[64, 256, 4096]" = torch.ops.prims.convert_element_type.default(view_1, torch.float32);  view_1 = None
        mul_2: "f32[64, 256, 4096]" = torch.ops.aten.mul.Tensor(convert_element_type_5, 0.5)
        mul_3: "f32[64, 256, 4096]" = torch.ops.aten.mul.Tensor(convert_element_type_5, 0.7071067811865476);  convert_element_type_5 = None
        erf: "f32[64, 256, 4096]" = torch.ops.aten.erf.default(mul_3);  mul_3 = None
        add_2: "f32[64, 256, 4096]" = torch.ops.aten.add.Tensor(erf, 1);  erf = None
        mul_4: "f32[64, 256, 4096]" = torch.ops.aten.mul.Tensor(mul_2, add_2);  mul_2 = add_2 = None
        convert_element_type_6: "f16[64, 256, 4096]" = torch.ops.prims.convert_element_type.default(mul_4, torch.float16);  mul_4 = None
        mul_5: "f16[64, 256, 4096]" = torch.ops.aten.mul.Tensor(convert_element_type_6, sigmoid);  convert_element_type_6 = None

        # File: /work/main/scripts/torch-device/compile_probe.py:68 in forward, code: d = self.down(u)
        view_2: "f16[16384, 4096]" = torch.ops.aten.view.default(mul_5, [16384, 4096]);  mul_5 = None
        permute_1: "f16[4096, 1024]" = torch.ops.aten.permute.default(primals_6, [1, 0])
        addmm_1: "f16[16384, 1024]" = torch.ops.aten.addmm.default(primals_7, view_2, permute_1);  primals_7 = permute_1 = None
        view_3: "f16[64, 256, 1024]" = torch.ops.aten.view.default(addmm_1, [64, 256, 1024]);  addmm_1 = None

        # File: /work/main/scripts/torch-device/compile_probe.py:70 in forward, code: return x + d
        add_3: "f16[64, 256, 1024]" = torch.ops.aten.add.Tensor(primals_3, view_3);  view_3 = None
        return (add_3, primals_3, primals_4, primals_6, getitem_1, rsqrt, sigmoid, view, addmm, view_2)
