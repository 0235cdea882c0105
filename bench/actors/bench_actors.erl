%% bench/actors/bench_actors.erl — the Erlang counterparts of bench_actors.c
%% (same workloads, same sizes, same output lines):
%%   RESULT <name> <rate> <unit> <seconds>
%% Run: erl +S 2 +P 2000000 -noshell -pa DIR -run bench_actors main WHAT
-module(bench_actors).
-export([main/1]).

envi(Name, Def) ->
    case os:getenv(Name) of
        false -> Def;
        "" -> Def;
        S -> list_to_integer(S)
    end.

now_ns() -> erlang:monotonic_time(nanosecond).

result(Name, Rate, Unit, Secs) ->
    io:format("RESULT ~s ~.4g ~s ~.3f~n", [Name, float(Rate), Unit, float(Secs)]).

main([What]) ->
    Scale = envi("BENCH_SCALE", 1),
    All = What =:= "all",
    Run = fun(N, F) -> case All orelse What =:= N of true -> F(); false -> ok end end,
    Run("pingpong", fun() -> pingpong(envi("PINGPONG_N", 2000000) div Scale) end),
    Run("threadring", fun() -> threadring(envi("THREADRING_ACTORS", 1000),
                                          envi("THREADRING_HOPS", 10000000) div Scale) end),
    Run("counting", fun() -> counting(envi("COUNTING_N", 2000000) div Scale) end),
    Run("forkjoin", fun() -> forkjoin(envi("FORKJOIN_ACTORS", 60),
                                      envi("FORKJOIN_N", 20000) div Scale) end),
    Run("big", fun() -> big(envi("BIG_ACTORS", 120), envi("BIG_PINGS", 10000) div Scale) end),
    Run("chameneos", fun() -> chameneos(envi("CHAMENEOS_N", 10),
                                        envi("CHAMENEOS_MEETINGS", 400000) div Scale) end),
    Run("spawn", fun() -> spawn_bench(envi("SPAWN_N", 1000000)) end),
    init:stop();
main(_) ->
    main(["all"]).

%% ---- pingpong ---------------------------------------------------------------
pingpong(N) ->
    Main = self(),
    Pong = spawn(fun pong/0),
    Ping = spawn(fun() -> receive go -> ping(Pong, N, Main) end end),
    T0 = now_ns(),
    Ping ! go,
    receive done -> ok end,
    T = (now_ns() - T0) / 1.0e9,
    exit(Pong, kill),
    result("pingpong", N / T, "roundtrips/s", T).

pong() ->
    receive {ping, From} -> From ! pong, pong() end.

ping(_, 0, Main) -> Main ! done;
ping(Pong, N, Main) ->
    Pong ! {ping, self()},
    receive pong -> ping(Pong, N - 1, Main) end.

%% ---- threadring -------------------------------------------------------------
threadring(R, Hops) ->
    Main = self(),
    First = spawn(fun() -> receive {next, Nx} -> ring(Nx, Main) end end),
    Last = lists:foldl(fun(_, Next) -> spawn(fun() -> ring(Next, Main) end) end,
                       First, lists:seq(2, R)),
    First ! {next, Last},
    T0 = now_ns(),
    First ! {token, Hops},
    receive done -> ok end,
    T = (now_ns() - T0) / 1.0e9,
    result("threadring", Hops / T, "hops/s", T).

ring(Next, Main) ->
    receive
        {token, 0} -> Main ! done, ring(Next, Main);
        {token, N} -> Next ! {token, N - 1}, ring(Next, Main)
    end.

%% ---- counting -----------------------------------------------------------------
counting(N) ->
    Main = self(),
    Counter = spawn_opt(fun() -> counter(0) end, [{message_queue_data, off_heap}]),
    Prod = spawn(fun() -> receive go -> produce(Counter, N), Counter ! {get, Main} end end),
    T0 = now_ns(),
    Prod ! go,
    receive {count, N} -> ok end,
    T = (now_ns() - T0) / 1.0e9,
    result("counting", N / T, "msgs/s", T).

counter(C) ->
    receive
        inc -> counter(C + 1);
        {get, From} -> From ! {count, C}
    end.

produce(_, 0) -> ok;
produce(C, N) -> C ! inc, produce(C, N - 1).

%% ---- fork-join throughput ------------------------------------------------------------
forkjoin(A, N) ->
    Main = self(),
    Ws = [spawn_opt(fun() -> fj(N, Main) end, [{message_queue_data, off_heap}])
          || _ <- lists:seq(1, A)],
    T0 = now_ns(),
    Src = spawn(fun() -> fj_send(Ws, N) end),
    _ = Src,
    [receive fj_done -> ok end || _ <- Ws],
    T = (now_ns() - T0) / 1.0e9,
    result("forkjoin", A * N / T, "msgs/s", T).

fj_send(_, 0) -> ok;
fj_send(Ws, N) -> [W ! msg || W <- Ws], fj_send(Ws, N - 1).

fj(0, Main) -> Main ! fj_done;
fj(N, Main) ->
    receive msg -> _ = work(37.2, 8), fj(N - 1, Main) end.

work(X, 0) -> X;
work(X, K) -> work(X * 1.0001 + 0.5, K - 1).

%% ---- big -------------------------------------------------------------------------------
big(W, P) ->
    Main = self(),
    Ws = list_to_tuple([spawn(fun() -> receive {peers, T, Seed} -> big_loop(T, W, P, Seed, Main) end end)
                        || _ <- lists:seq(1, W)]),
    T0 = now_ns(),
    [element(I, Ws) ! {peers, Ws, I * 7919 + 1} || I <- lists:seq(1, W)],
    [receive big_done -> ok end || _ <- lists:seq(1, W)],
    T = (now_ns() - T0) / 1.0e9,
    result("big", 2 * W * P / T, "msgs/s", T).

lcg(S) -> (S * 6364136223846793005 + 1442695040888963407) band 16#FFFFFFFFFFFFFFFF.

big_loop(Ws, W, Left, Seed, Main) ->
    case Left of
        0 -> Main ! big_done, big_serve();
        _ ->
            S2 = lcg(Seed),
            element(((S2 bsr 33) rem W) + 1, Ws) ! {ping, self()},
            big_wait(Ws, W, Left - 1, S2, Main)
    end.

big_wait(Ws, W, Left, Seed, Main) ->
    receive
        {ping, From} -> From ! pong, big_wait(Ws, W, Left, Seed, Main);
        pong -> big_loop(Ws, W, Left, Seed, Main)
    end.

big_serve() ->
    receive {ping, From} -> From ! pong, big_serve(); stop -> ok end.

%% ---- chameneos ------------------------------------------------------------------------
chameneos(C, M) ->
    Main = self(),
    Mall = spawn(fun() -> mall(M, none, 0, C, Main) end),
    Cs = [spawn(fun() -> cham(Mall) end) || _ <- lists:seq(1, C)],
    T0 = now_ns(),
    lists:foldl(fun(P, I) -> P ! {color, I rem 3}, I + 1 end, 0, Cs),
    receive cham_done -> ok end,
    T = (now_ns() - T0) / 1.0e9,
    result("chameneos", M / T, "meetings/s", T).

complement(A, A) -> A;
complement(A, B) -> 3 - A - B.

mall(Left, Waiting, Stopped, C, Main) ->
    receive
        {meet, From, Color} when Left =:= 0 ->
            _ = Color,
            From ! stop,
            case Stopped + 1 of
                C -> Main ! cham_done;
                S -> mall(0, Waiting, S, C, Main)
            end;
        {meet, From, Color} ->
            case Waiting of
                none -> mall(Left, {From, Color}, Stopped, C, Main);
                {W, WC} ->
                    NC = complement(Color, WC),
                    W ! {color, NC},
                    From ! {color, NC},
                    mall(Left - 1, none, Stopped, C, Main)
            end
    end.

cham(Mall) ->
    receive
        {color, Col} -> Mall ! {meet, self(), Col}, cham(Mall);
        stop -> ok
    end.

%% ---- spawn -------------------------------------------------------------------------------
spawn_bench(N) ->
    erlang:garbage_collect(),
    M0 = erlang:memory(total),
    T0 = now_ns(),
    Ps = spawn_n(N, []),
    T = (now_ns() - T0) / 1.0e9,
    M1 = erlang:memory(total),
    result("spawn", N / T, "actors/s", T),
    result("spawn_mem", (M1 - M0) / N, "bytes/actor", T),
    result("spawn_total_mib", M1 / 1048576, "MiB", T),
    [exit(P, kill) || P <- Ps],
    ok.

spawn_n(0, Acc) -> Acc;
spawn_n(N, Acc) -> spawn_n(N - 1, [spawn(fun idle/0) | Acc]).

idle() -> receive stop -> ok end.
