// Grows an array of buffers-as-strings until V8's heap limit (run with --max-old-space-size=32):
// Node prints V8's last GC lines and `FATAL ERROR: ... JavaScript heap out of memory`, then aborts.
const keep = [];
for (let epoch = 1; ; epoch++) {
  for (let i = 0; i < 10000; i++) keep.push({ step: i, w: new Array(64).fill(epoch) });
  if (epoch % 10 === 0) console.log(`epoch ${epoch} kept ${keep.length}`);
}
