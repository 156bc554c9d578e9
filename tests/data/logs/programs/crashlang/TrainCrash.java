// A toy "training job" that dies the way DL4J/Spark/DJL drivers do. Modes (args[0]):
// main (an uncaught exception with a cause chain in main), thread (a worker thread dies,
// main goes on and finishes), healthy (logs WARN/ERROR words and a caught exception's
// one-line message; exits 0).
import java.util.logging.Logger;

public class TrainCrash {
    static final Logger LOG = Logger.getLogger("TrainCrash");

    static float[] loadShard(String path) {
        try {
            throw new java.io.FileNotFoundException(path + " (No such file or directory)");
        } catch (java.io.IOException e) {
            throw new IllegalStateException("Could not load dataset shard " + path, e);
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "healthy";
        for (int step = 0; step < 3; step++) {
            System.out.printf("step %d loss %.4f%n", step, 2.0 / (step + 1));
        }
        if (mode.equals("main")) {
            loadShard("/data/shard-00001.bin");
        } else if (mode.equals("thread")) {
            Thread t = new Thread(() -> { int[] a = new int[2]; a[5] = 1; }, "loader-0");
            t.start();
            t.join();
            System.out.println("main: epoch finished without the loader");
        } else {
            LOG.warning("WARN no GPU backend found, falling back to CPU; error rate 0.0");
            try {
                loadShard("/data/optional.bin");
            } catch (IllegalStateException e) {
                System.out.println("INFO skipped optional shard: " + e.getMessage() + " (Caused by: " + e.getCause().getClass().getName() + ")");
            }
            System.out.println("INFO training finished, Exception count 0");
        }
    }
}
