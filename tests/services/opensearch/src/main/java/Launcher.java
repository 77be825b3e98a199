import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.transport.Netty4Plugin;

/**
 * Runs one OpenSearch node for agent-health's trace tests, on 127.0.0.1 only.
 *
 * Usage: java -cp target/classes:target/lib/* Launcher HOME_DIR HTTP_PORT
 * Prints "READY <port>" once started; stops when its standard input closes (so the node never
 * outlives the test process that started it) or on SIGTERM.
 */
public final class Launcher {
    /** A Node built from classpath plugins: the HTTP transport module comes from Maven, not a zip. */
    static final class ClasspathNode extends Node {
        ClasspathNode(Environment env) {
            super(env, List.of(Netty4Plugin.class), true);
        }
    }

    public static void main(String[] args) throws Exception {
        Path home = Path.of(args[0]).toAbsolutePath();
        String httpPort = args[1];
        Files.createDirectories(home.resolve("config"));
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Settings settings = Settings.builder()
            .put("cluster.name", "agent-health-test")
            .put("node.name", "agent-health-test-node")
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true)
            .build();
        LogConfigurator.configureWithoutConfig(settings);
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            settings, Map.of(), home.resolve("config"), () -> "agent-health-test-node");
        Node node = new ClasspathNode(env);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try { node.close(); } catch (Exception ignored) { }
        }));
        node.start();
        System.out.println("READY " + httpPort);
        System.out.flush();
        InputStream in = System.in;
        while (in.read() != -1) { }
        System.exit(0);
    }
}
