// A toy "tfjs-node training script" that dies the way Node programs do. Modes (argv[2]):
// throw (an uncaught Error after some steps), reject (an unhandled promise rejection),
// healthy (console.error/warn lines and a caught Error; exits 0).
function loadModel(path) {
  const e = new Error(`ENOENT: no such file or directory, open '${path}'`);
  e.code = 'ENOENT';
  throw e;
}
const mode = process.argv[2] || 'healthy';
for (let step = 0; step < 3; step++) console.log(`Epoch ${step + 1} / 3 loss=${(2 / (step + 1)).toFixed(4)}`);
if (mode === 'throw') {
  loadModel('./model/model.json');
} else if (mode === 'reject') {
  (async () => { throw new TypeError("Cannot read properties of undefined (reading 'shape')"); })();
} else {
  console.warn('Warning: no GPU found; UnhandledPromiseRejection handling is set to "throw"');
  try { loadModel('./optional.json'); } catch (err) { console.error(`error (ignored): ${err.message}`); }
  console.log('Training done. Uncaught errors: 0');
}
