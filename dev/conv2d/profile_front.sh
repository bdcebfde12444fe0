source scripts/device_env.sh .dev/whl-cutlass >/dev/null 2>&1
export OASR_GIT_COMMIT=$1
cat > /tmp/fe.py <<'PY'
import sys; sys.path.insert(0, 'tests')
import torch, oasr, test_conv2d as t
x, w1, b1, w2, b2 = t.front_end(16, 1500, 80, 256, torch.bfloat16, 'cuda'); oasr.conv2d_subsampling(x, w1, b1, w2, b2)
torch.cuda.synchronize()
PY
python3 /tmp/fe.py
timeout 200 ncu --clock-control none -k regex:Subsampling -c 1 --import-source no --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis --print-details all python3 /tmp/fe.py > $OUT/det.txt 2>&1
timeout 200 ncu --clock-control none -k regex:Subsampling -c 1 --section SourceCounters --page source --print-source sass --csv python3 /tmp/fe.py > $OUT/src.csv 2>&1
ls -la $OUT; grep -E "Stall|Pipe|Tensor" $OUT/det.txt | head -60
