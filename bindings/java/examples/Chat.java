// SPDX-License-Identifier: Apache-2.0
/*
 * Chat — a terminal chat over the llmsvc Java binding: one user turn per line of standard
 * input, each reply streamed to standard output as it is generated.
 *
 *   java -Djava.library.path=DIR -cp llmsvc.jar Chat.java [--target T] [--context ID]
 *        [--system TEXT] [--max-tokens N] [--temperature T]
 *
 * --target      "embedded" (default) or "unix:PATH" (the llmsvcd daemon); unset: $LLMSVC_TARGET
 * --context ID  a persistent context: opened when it exists, else created; a later run with the
 *               same id continues the conversation. Without it, a fresh context is used and deleted.
 * A summary of the context goes to standard error at the end. Ctrl-C during a reply cancels it.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.llmsvc.BindOptions;
import org.llmsvc.CallOptions;
import org.llmsvc.CallResult;
import org.llmsvc.CancelledException;
import org.llmsvc.ContextInfo;
import org.llmsvc.ContextOptions;
import org.llmsvc.LLMContext;
import org.llmsvc.LLMException;
import org.llmsvc.LLMService;
import org.llmsvc.NotFoundException;

public final class Chat {
  private Chat() {}

  public static void main(String[] args) throws Exception {
    String target = null;
    String contextId = null;
    String system = null;
    CallOptions call = new CallOptions();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (i + 1 >= args.length && a.startsWith("--")) usage("missing value for " + a);
      switch (a) {
        case "--target":
          target = args[++i];
          break;
        case "--context":
          contextId = args[++i];
          break;
        case "--system":
          system = args[++i];
          break;
        case "--max-tokens":
          call.maxTokens(Integer.parseInt(args[++i]));
          break;
        case "--temperature":
          call.temperature(Float.parseFloat(args[++i]));
          break;
        default:
          usage("unknown argument " + a);
      }
    }
    // UTF-8 whatever the platform default: replies hold any character.
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    boolean interactive = System.console() != null;

    try (LLMService svc = LLMService.bind(new BindOptions().target(target));
         LLMContext ctx = open(svc, contextId, system)) {
      // Ctrl-C cancels the reply being generated (the call ends with CancelledException) and exits.
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          ctx.cancel();
        } catch (IllegalStateException closedAlready) {
          // a normal exit: main closed the context before the hooks ran
        }
      }));
      String line;
      while (true) {
        if (interactive) out.print("> ");
        if ((line = in.readLine()) == null) {
          if (interactive) out.println(); // after the prompt Ctrl-D left on the line
          break;
        }
        if (line.isBlank()) continue;
        try {
          CallResult r = svc.callLLM(ctx, line, call, (piece, token) -> {
            out.print(piece);
            return true;
          });
          out.println();
          if (interactive) out.printf("[%d tokens, %s, %.0f ms to first token]%n", r.generatedTokens(), r.finishReason(), r.ttftMs());
        } catch (CancelledException e) {
          out.println(" [cancelled]");
        }
      }
      ContextInfo info = ctx.info();
      System.err.printf("context %s: %d tokens, %d turns%n", info.id(), info.tokens(), info.turns());
      if (contextId == null) svc.delLLMCtx(ctx);
    } catch (LLMException e) {
      System.err.println("chat: " + e.getMessage());
      System.exit(1);
    }
  }

  /** The context named on the command line (reopened, or created the first time), else a fresh one. */
  private static LLMContext open(LLMService svc, String id, String system) {
    if (id == null) return svc.newLLMCtx(new ContextOptions().systemPrompt(system));
    try {
      return svc.openLLMCtx(id);
    } catch (NotFoundException e) {
      return svc.newLLMCtx(new ContextOptions().id(id).systemPrompt(system));
    }
  }

  private static void usage(String problem) {
    System.err.println("chat: " + problem);
    System.err.println("usage: Chat [--target embedded|unix:PATH] [--context ID] [--system TEXT] [--max-tokens N] [--temperature T]");
    System.exit(2);
  }
}
