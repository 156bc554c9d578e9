#!/bin/sh
# Real host-side death reports (issue 22, helper k13host, 2026-12-03): bash's job-control notices of
# background jobs ended by a signal or a non-zero exit (an interactive bash under script(1), so job
# control is on), and GNU time's status line. No memory limit is involved: these are the reports a
# signal or an exit leaves, the words the readers in controller/judge/host_kills.py read.
# Usage: sh make_host_kill_logs.sh OUTDIR   (bash 5.2.15, util-linux script, Debian's GNU time, whose --version prints UNKNOWN; python3)
set -e
out=${1:-.}
in=$(mktemp)
cat > "$in" <<'IN'
python3 -c "import time; time.sleep(30)" &
sleep 0.5; kill -KILL %1
sleep 0.5
python3 -c "import os,time; time.sleep(0.3); os.kill(os.getpid(), 11)" &
sleep 1
python3 -c "import os,time; time.sleep(0.3); os.kill(os.getpid(), 6)" &
sleep 1
python3 -c "import sys,time; time.sleep(0.3); sys.exit(3)" &
sleep 1
python3 -c "import time; time.sleep(0.3); print('epoch 1 done')" &
sleep 1
exit
IN
timeout 30 script -q -c "env -i PS1='$ ' TERM=dumb HOME=/tmp PATH=/usr/bin:/bin bash --norc -i" /dev/null < "$in" \
  | tr -d '\r' | sed -n '/^\$ /,$p' > "$out/bash_job_reports.log"
rm -f "$in"
{
  /usr/bin/time python3 -c "import os; os.kill(os.getpid(), 9)" || true
  /usr/bin/time python3 -c "import sys; sys.exit(3)" || true
  /usr/bin/time python3 -c "print('train ok')" || true
} > "$out/gnu_time_reports.log" 2>&1
